/* jq's compiler alone, with nothing run: the fuzz target holds jq's filter parser to what its
   command line promises (a program, or messages ending in "jq: N compile errors"), and a fuzzer
   must not run what it writes (`repeat(.)` never ends). */
#include <stdio.h>
#include <stdlib.h>

#include "jq.h"
#include "jv.h"

static void wasmsand_collect(void *stream, jv msg) {
  msg = jq_format_error(msg);
  fprintf((FILE *)stream, "%s\n", jv_string_value(msg));
  jv_free(msg);
}

/* 1 when `filter` compiles, 0 when it does not, -1 when there was no memory to try; jq's
   messages are gathered in *errors, which is malloc'd and the caller frees. */
int wasmsand_jq_compile(const char *filter, char **errors, size_t *len) {
  *errors = NULL;
  *len = 0;
  FILE *messages = open_memstream(errors, len);
  if (!messages)
    return -1;
  jq_state *jq = jq_init();
  if (!jq) {
    fclose(messages);
    return -1;
  }
  jq_set_error_cb(jq, wasmsand_collect, messages);
  /* No library path: a module is found only where the filter itself says to look. */
  jq_set_attr(jq, jv_string("JQ_LIBRARY_PATH"), jv_array());
  int compiled = jq_compile(jq, filter);
  jq_teardown(&jq);
  fclose(messages);
  return compiled;
}
