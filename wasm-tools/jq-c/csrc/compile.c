/* jq's compiler alone, with nothing run: the fuzz target holds jq's filter parser to what its
   command line promises (a program, or messages ending in "jq: N compile errors"), and a fuzzer
   must not run what it writes (`repeat(.)` never ends). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jq.h"
#include "jv.h"
#include "compile.h"
#include "locfile.h"
#include "builtin.h"
#include "jq_parser.h"

static void wasmsand_collect(void *stream, jv msg) {
  msg = jq_format_error(msg);
  fprintf((FILE *)stream, "%s\n", jv_string_value(msg));
  jv_free(msg);
}

/* 1 when `filter` compiles, 0 when it does not, -1 when there was no memory to try; jq's
   messages are gathered in *errors, which is malloc'd and the caller frees. */
/* A stream gathering text in *out (malloc'd, the caller frees) and a jq state, or 0 when
   there was no memory for either. */
static int wasmsand_start(char **out, size_t *len, FILE **stream, jq_state **jq) {
  *out = NULL;
  *len = 0;
  *stream = open_memstream(out, len);
  if (!*stream)
    return 0;
  *jq = jq_init();
  if (!*jq) {
    fclose(*stream);
    return 0;
  }
  return 1;
}

int wasmsand_jq_compile(const char *filter, char **errors, size_t *len) {
  FILE *messages;
  jq_state *jq;
  if (!wasmsand_start(errors, len, &messages, &jq))
    return -1;
  jq_set_error_cb(jq, wasmsand_collect, messages);
  /* No library path: a module is found only where the filter itself says to look. */
  jq_set_attr(jq, jv_string("JQ_LIBRARY_PATH"), jv_array());
  int compiled = jq_compile(jq, filter);
  jq_teardown(&jq);
  fclose(messages);
  return compiled;
}

/* The test that csrc/drop_unreferenced.c keeps what jq's own version keeps: `filter` parsed,
   every builtin bound in and the unreferenced ones dropped (by jq's version when `original`),
   then the definitions left, in order, one per line in *out (malloc'd, the caller frees).
   Returns jq's error count, or -1 when there was no memory. */

extern int wasmsand_original_drop;
void wasmsand_write_definitions(block b, FILE *out);

static void wasmsand_quiet(void *data, jv msg) {
  (void)data;
  jv_free(msg);
}

int wasmsand_jq_definitions(const char *filter, int original, char **out, size_t *len) {
  FILE *stream;
  jq_state *jq;
  if (!wasmsand_start(out, len, &stream, &jq))
    return -1;
  jq_set_error_cb(jq, wasmsand_quiet, NULL);
  struct locfile *src = locfile_init(jq, "<test>", filter, strlen(filter));
  block program;
  int nerrors = jq_parse(src, &program);
  if (nerrors == 0) {
    wasmsand_original_drop = original;
    nerrors = builtins_bind(jq, &program);
    wasmsand_original_drop = 0;
    if (nerrors == 0) {
      wasmsand_write_definitions(program, stream);
      block_free(program);
    }
  }
  locfile_free(src);
  jq_teardown(&jq);
  fclose(stream);
  return nerrors;
}
