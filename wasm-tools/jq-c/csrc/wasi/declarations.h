/* Functions wasi-libc has but the headers of Debian's wasi-libc package do not declare. Called
   undeclared, C would assume they return int, and wasm-ld would link the mismatched call to a
   trap. */
#ifndef WASMSAND_DECLARATIONS_H
#define WASMSAND_DECLARATIONS_H
double gamma(double x);
char *realpath(const char *restrict path, char *restrict resolved);
#endif
