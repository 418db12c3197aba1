/* jq's own command line (main.c) as a function the Rust entry point calls, with its results
   written to a stream the caller chooses: yq's YAML output reads them back. Its messages stay on
   stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "jv.h"

static FILE *wasmsand_results;

#undef stdout
#define stdout wasmsand_results
/* main.c prints a result with jv_dump, which writes to the C library's stdout itself. */
#define jv_dump(x, flags) jv_dumpf((x), wasmsand_results, (flags))
#define main jq_cli_main
#include "main.c"
#undef main
#undef stdout

int wasmsand_jq(int argc, char **argv) {
  /* glibc block-buffers a stdout that is not a terminal in 4 KiB from the first byte, so jq's
     messages on stderr come before the results that preceded them. musl flushes the first line
     before it notices there is no terminal. */
  static char buffer[4096];
  if (!isatty(1))
    setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
  wasmsand_results = stdout;
  return jq_cli_main(argc, argv);
}

/* Runs jq with its results gathered in memory: *out is malloc'd and the caller frees it. */
int wasmsand_jq_captured(int argc, char **argv, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  wasmsand_results = open_memstream(out, len);
  if (!wasmsand_results) {
    fprintf(stderr, "jq: error: cannot hold the results in memory\n");
    return 2;
  }
  /* main closes its results stream on its way out, which settles *out and *len. */
  return jq_cli_main(argc, argv);
}

void wasmsand_prepare_builtins(jq_state *jq);
#ifdef __wasi__
void __wasilibc_deinitialize_environ(void);
#endif

/* Makes jq's builtins ahead of the first program (build.rs, OWN, says why): 0 when done. The
   state is never torn down: the builtins' source location refers to it. */
int wasmsand_jq_prepare(void) {
  jq_state *jq = jq_init();
  if (!jq)
    return 1;
  wasmsand_prepare_builtins(jq);
#ifdef __wasi__
  /* The C library read the environment at start-up. This memory is where every later run
     starts, and a run's environment is its own: it is read again at its first use. */
  __wasilibc_deinitialize_environ();
#endif
  return 0;
}
