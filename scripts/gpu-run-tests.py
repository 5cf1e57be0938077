#!/usr/bin/env python3
"""Runs the tests of a build tree that was configured elsewhere, from `ctest --show-only=json-v1`
saved beside it: on the GPU machine there is no CTest tree at the build's original path. Paths under
the original source root are mapped to this checkout, the original cmake to the one on PATH; each
test runs with its ENVIRONMENT, ENVIRONMENT_MODIFICATION, WORKING_DIRECTORY and TIMEOUT, the
parallel ones first (-j), then the RUN_SERIAL ones alone. Prints one line per failure and
'N passed, N failed'; writes every test's output to --log.
Usage: gpu-run-tests.py TESTS.json --from-root OLD --to-root NEW [-j N] [--log FILE] [--deadline S]"""
import argparse, concurrent.futures as cf, json, os, shutil, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("tests")
p.add_argument("--from-root", required=True)
p.add_argument("--to-root", required=True)
p.add_argument("--from-cmake", default="")
p.add_argument("-j", type=int, default=os.cpu_count() or 4)
p.add_argument("--log", default="/dev/null")
p.add_argument("--deadline", type=float, default=1e9, help="seconds after which no further test starts")
a = p.parse_args()
cmake = shutil.which("cmake") or "cmake"


def mapped(s):
    s = str(s)
    if a.from_cmake and s == a.from_cmake:
        return cmake
    return s.replace(a.from_root, a.to_root)


def prepare(t):
    props = {pr["name"]: pr["value"] for pr in t.get("properties", [])}
    env = dict(os.environ)
    for kv in props.get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = mapped(v)
    for kv in props.get("ENVIRONMENT_MODIFICATION", []):
        k, _, op = kv.partition("=")
        verb, _, v = op.partition(":")
        if verb == "unset":
            env.pop(k, None)
        elif verb == "set":
            env[k] = mapped(v)
    return {"name": t["name"], "cmd": [mapped(c) for c in t["command"]], "env": env,
            "cwd": mapped(props.get("WORKING_DIRECTORY", a.to_root)), "timeout": float(props.get("TIMEOUT", 300)),
            "serial": bool(props.get("RUN_SERIAL", False))}


start = time.time()


def run(t):
    if time.time() - start > a.deadline:
        return t, "not run", 0.0, "deadline passed"
    t0 = time.time()
    try:
        os.makedirs(t["cwd"], exist_ok=True)
        r = subprocess.run(t["cmd"], env=t["env"], cwd=t["cwd"], capture_output=True, text=True, errors="replace",
                           timeout=t["timeout"])
        status = "passed" if r.returncode == 0 else f"failed (rc {r.returncode})"
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        status, out = f"failed (timeout {t['timeout']:.0f} s)", str(e.stdout or "") + str(e.stderr or "")
    except OSError as e:
        status, out = f"failed ({e})", ""
    return t, status, time.time() - t0, out


tests = [prepare(t) for t in json.load(open(a.tests))["tests"] if t.get("command")]
results = []
with cf.ThreadPoolExecutor(max_workers=a.j) as pool:
    results += pool.map(run, [t for t in tests if not t["serial"]])
for t in tests:
    if t["serial"]:
        results.append(run(t))
with open(a.log, "w") as log:
    for t, status, dt, out in results:
        log.write(f"=== {t['name']}: {status} in {dt:.1f} s\n$ {' '.join(t['cmd'])}\n{out}\n")
passed = sum(1 for r in results if r[1] == "passed")
notrun = sum(1 for r in results if r[1] == "not run")
failed = len(results) - passed - notrun
for t, status, dt, _ in results:
    if status != "passed":
        print(f"  {t['name']}: {status}")
slow = sorted(results, key=lambda r: -r[2])[:5]
print("slowest: " + ", ".join(f"{r[0]['name']} {r[2]:.1f} s" for r in slow))
print(f"{passed} passed, {failed} failed" + (f", {notrun} skipped" if notrun else ""))
sys.exit(0 if failed == 0 and notrun == 0 else 1)
