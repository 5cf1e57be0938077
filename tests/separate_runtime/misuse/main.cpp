// A source for the targets of the misuse cases (never compiled).
int main() { return 0; }
