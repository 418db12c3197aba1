/* glibc's gamma() is lgamma() (the BSD name); jq's `gamma` builtin is that one on Debian. musl
   leaves it out. */
#include <math.h>

double gamma(double x) { return lgamma(x); }
