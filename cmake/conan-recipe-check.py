"""Offline check of the conan recipe (conan cannot be installed here): the recipe's attributes, and
its set_version() logic run on include/locus/version.hpp, agree with CMakeLists.txt's version.
Usage: python3 cmake/conan-recipe-check.py <repo> <cmake project version>"""
import ast
import re
import sys

repo, cmake_version = sys.argv[1], sys.argv[2]
tree = ast.parse(open(f"{repo}/conanfile.py").read())
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
attrs = {t.id: n.value for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
errors = []
def literal(name):
    return ast.literal_eval(attrs[name]) if name in attrs else None
if literal("name") != "locus": errors.append("name must be 'locus'")
if literal("package_type") != "header-library": errors.append("package_type must be 'header-library'")
if literal("no_copy_source") is not True: errors.append("no_copy_source must be True")
if literal("license") != "Apache-2.0": errors.append("license must be Apache-2.0")
if "cuda" not in (literal("options") or {}): errors.append("a 'cuda' option is required")
if "package_id" not in methods or "self.info.clear()" not in ast.unparse(methods["package_id"]):
    errors.append("package_id() must clear the package id")
info = ast.unparse(methods.get("package_info", ast.Pass()))
if "'cmake_target_name', 'locus::locus'" not in info: errors.append("cmake_target_name must be locus::locus")
if "set_version" not in methods: errors.append("set_version() must read version.hpp")
# set_version()'s own expression, on the real header
text = open(f"{repo}/include/locus/version.hpp").read()
version = ".".join(re.search(rf"#define LOCUS_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH"))
if version != cmake_version: errors.append(f"recipe version {version} differs from CMake's {cmake_version}")
for e in errors: print("conan recipe:", e)
if errors: sys.exit(1)
print(f"conan recipe: locus {version}, header-library, package_id cleared, locus::locus: ok")
