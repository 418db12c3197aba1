//! Compiles jq 1.6 (the C program Debian ships, which is the reference the project measures jq
//! against) and the Oniguruma it bundles, from the `jq-src` crate's copy of both. Autotools is
//! not used: this is the only C program in the guest and its configuration is a handful of
//! facts about the target, stated below.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Oniguruma's sources jq needs: the engine and the encodings jq uses (UTF-8, with ASCII and
/// Unicode beneath it).
const ONIG: &[&str] = &[
    "regerror",
    "regparse",
    "regext",
    "regcomp",
    "regexec",
    "reggnu",
    "regenc",
    "regsyntax",
    "regtrav",
    "regversion",
    "st",
    "onig_init",
    "unicode",
    "ascii",
    "utf8",
    "unicode_unfold_key",
    "unicode_fold1_key",
    "unicode_fold2_key",
    "unicode_fold3_key",
];

/// libjq and the lexer and parser jq's repository carries pre-generated; main.c comes in
/// through `csrc/cli.c`.
const JQ: &[&str] = &[
    "builtin",
    "bytecode",
    "compile",
    "execute",
    "jv",
    "jv_alloc",
    "jv_aux",
    "jv_dtoa",
    "jv_file",
    "jv_parse",
    "jv_print",
    "jv_unicode",
    "linker",
    "locfile",
    "util",
    "lexer",
    "parser",
    "jq_test",
];

/// Where Debian's jq (1.6-2.1+deb12u1, the reference) differs from the jq-1.6 release the
/// `jq-src` crate carries: (file, jq-1.6's text, Debian's).
const DEBIAN: &[(&str, &str, &str)] = &[
    // CVE-2025-48060: an empty string's buffer was not terminated (`[[]|implode]`).
    (
        "jv.c",
        "  memset(s->data, 0, length);\n  jv r = {JV_KIND_STRING",
        "  memset(s->data, 0, length);\n  s->data[length] = 0;\n  jv r = {JV_KIND_STRING",
    ),
    // What Debian's jq writes for values nested past its printing depth.
    (
        "jv_print.c",
        "\"<skipped: too deep>\"",
        "\"<stripped: exceeds max depth>\"",
    ),
];

/// This project's own changes to jq's C, which change no output: (file, jq's text, ours).
const OWN: &[(&str, &str, &str)] = &[
    // jq compiles its ~250 builtins (parsing builtin.jq, then binding them to each other) for
    // every program, which is most of a short jq run: 13 ms natively, 17 ms in the guest. The
    // builtins do not depend on the program, so they are made in a function of their own, and
    // `wasmsand_prepare_builtins` can make them ahead of time: the sandbox does it once per
    // process and keeps the guest's memory from then on as the start of every run
    // (`wasmsand_jq_prepare` in csrc/cli.c). A run consumes the prepared block; a second
    // compile in the same instance (the host's fuzz target) makes them again. The prepared
    // builtins a program does not use are not freed (`wasmsand_keep_dropped`): freeing them
    // wrote to every page of them, which the next run then had to get back from the image.
    (
        "builtin.c",
        "  nerrors = builtins_bind_one(jq, &builtins, jq_builtins);\n  assert(!nerrors);\n  \
         builtins = bind_bytecoded_builtins(builtins);\n  \
         builtins = gen_cbinding(function_list, sizeof(function_list)/sizeof(function_list[0]), builtins);\n  \
         builtins = gen_builtin_list(builtins);\n",
        "  builtins = wasmsand_builtins(jq);\n",
    ),
    (
        "builtin.c",
        "int builtins_bind(jq_state *jq, block* bb) {\n",
        "static block wasmsand_make_builtins(jq_state *jq) {\n  \
         block builtins = gen_noop();\n  \
         int nerrors = builtins_bind_one(jq, &builtins, jq_builtins);\n  \
         assert(!nerrors);\n  \
         builtins = bind_bytecoded_builtins(builtins);\n  \
         builtins = gen_cbinding(function_list, sizeof(function_list)/sizeof(function_list[0]), builtins);\n  \
         return gen_builtin_list(builtins);\n\
         }\n\n\
         static block wasmsand_prepared;\n\
         static int wasmsand_is_prepared;\n\n\
         void wasmsand_prepare_builtins(jq_state *jq) {\n  \
         wasmsand_prepared = wasmsand_make_builtins(jq);\n  \
         wasmsand_is_prepared = 1;\n\
         }\n\n\
         extern int wasmsand_keep_dropped;\n\n\
         static block wasmsand_builtins(jq_state *jq) {\n  \
         if (!wasmsand_is_prepared)\n    return wasmsand_make_builtins(jq);\n  \
         wasmsand_is_prepared = 0;\n  \
         wasmsand_keep_dropped = 1;\n  \
         return wasmsand_prepared;\n\
         }\n\n\
         int builtins_bind(jq_state *jq, block* bb) {\n",
    ),
    // `block_drop_unreferenced`, which each run calls on its program with every builtin bound
    // in, walked the whole program once per definition and pass: 3 ms of each run.
    // csrc/drop_unreferenced.c gives the same result from one walk; jq's own stays beside it
    // under another name, for the host's test that the two agree.
    (
        "compile.c",
        "block block_drop_unreferenced(block body) {\n",
        "#include \"drop_unreferenced.c\"\n\n\
         block wasmsand_original_drop_unreferenced(block body) {\n",
    ),
];

/// The math functions jq binds when configure finds them. All are in musl's libm, which is
/// wasi-libc's, and in glibc's, which is Debian's jq's.
const LIBM: &[&str] = &[
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "drem",
    "erf",
    "erfc",
    "exp",
    "exp10",
    "exp2",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "frexp",
    "gamma",
    "hypot",
    "j0",
    "j1",
    "jn",
    "ldexp",
    "lgamma",
    "lgamma_r",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "modf",
    "nearbyint",
    "nextafter",
    "nexttoward",
    "pow",
    "remainder",
    "rint",
    "round",
    "scalb",
    "scalbln",
    "significand",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "tgamma",
    "trunc",
    "y0",
    "y1",
    "yn",
];

/// What jq's configure finds on Linux and WASI alike.
const HAVE: &[&str] = &[
    "LIBONIG",
    "ALLOCA",
    "ALLOCA_H",
    "ISATTY",
    "GMTIME_R",
    "GMTIME",
    "LOCALTIME_R",
    "STRFTIME",
    "STRPTIME",
    "TIMEGM",
    "TM_TM_GMT_OFF",
    "GETTIMEOFDAY",
    "MEMMEM",
    "MKSTEMP",
    "ATEXIT",
];

fn main() {
    let src = jq_src::source_dir();
    let onig = src.join("modules/oniguruma/src");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wasm = env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "wasm32");
    println!("cargo:rerun-if-changed=csrc");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=WASMSAND_FUZZ_CLANG");
    // jq's own tests (jq.test), which the host's fuzz contract is checked against.
    println!("cargo:rustc-env=WASM_JQ_SRC={}", src.display());

    // What jq's Makefile generates: the builtins written in jq, as one C string, and the
    // version header.
    let gen_dir = out.join("gen");
    fs::create_dir_all(gen_dir.join("src")).expect("OUT_DIR is writable");
    let builtins = fs::read_to_string(src.join("src/builtin.jq")).expect("jq-src has builtin.jq");
    let mut inc = String::new();
    for line in builtins.lines() {
        inc.push('"');
        inc.push_str(&line.replace('\\', "\\\\").replace('"', "\\\""));
        inc.push_str("\\n\"\n");
    }
    write_if_changed(&gen_dir.join("src/builtin.inc"), &inc);
    write_if_changed(
        &gen_dir.join("src/version.h"),
        "#define JQ_VERSION \"1.6\"\n",
    );
    write_if_changed(&gen_dir.join("config.h"), &onig_config(wasm));

    let mut cc = cc::Build::new();
    // cargo-fuzz instruments Rust only. Built for a fuzz target, jq's C gets the same coverage
    // counters from clang, so the fuzzer is guided by jq's parser and not only by its caller.
    if !wasm && env::var_os("CARGO_CFG_FUZZING").is_some() {
        let clang = env::var("WASMSAND_FUZZ_CLANG").unwrap_or_else(|_| "clang-14".to_owned());
        cc.compiler(&clang);
        assert!(
            cc.get_compiler().is_like_clang(),
            "jq's C is instrumented for fuzzing by clang: {clang} is not clang \
             (WASMSAND_FUZZ_CLANG names another)"
        );
        // Edge counters without comparison tracing: jq binds its ~250 builtins into every
        // program it compiles, and traced comparisons there made each input about 40 times
        // slower. jq's words come from the target's dictionary instead.
        cc.flag("-fsanitize-coverage=inline-8bit-counters,pc-table");
    }
    // jq's and Oniguruma's warnings are theirs to fix; the build shows none of them.
    // (Not `warnings(false)`: its `-w` would also silence the one made an error below.)
    cc.flag(if wasm { "-Wno-everything" } else { "-w" })
        .opt_level(2)
        .include(&gen_dir)
        .include(src.join("src"))
        .include(&onig)
        // csrc/drop_unreferenced.c, which jq's compile.c includes (OWN).
        .include("csrc")
        .define("IEEE_8087", "1");
    if wasm {
        // WASI has no user database: `~` is $HOME or nothing.
        cc.include("csrc/wasi");
        let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        cc.flag("-include")
            .flag(
                manifest
                    .join("csrc/wasi/declarations.h")
                    .to_str()
                    .expect("a UTF-8 path"),
            )
            // A call to an undeclared function links to a trap in wasm when the guess at its
            // type is wrong: refused here instead.
            .flag("-Werror=implicit-function-declaration");
    }
    for h in HAVE {
        cc.define(&format!("HAVE_{h}"), "1");
    }
    for f in LIBM {
        cc.define(&format!("HAVE_{}", f.to_uppercase()), "1");
    }
    for f in ONIG {
        cc.file(onig.join(format!("{f}.c")));
    }
    let patched = out.join("debian");
    fs::create_dir_all(&patched).expect("OUT_DIR is writable");
    for f in JQ {
        let file = format!("{f}.c");
        let changes: Vec<_> = DEBIAN
            .iter()
            .chain(OWN)
            .filter(|(at, ..)| *at == file)
            .collect();
        if changes.is_empty() {
            cc.file(src.join("src").join(&file));
            continue;
        }
        let mut text = fs::read_to_string(src.join("src").join(&file)).expect("jq-src's sources");
        for (_, from, to) in changes {
            assert!(
                text.contains(from),
                "jq-src's {file} no longer has {from:?}"
            );
            text = text.replacen(from, to, 1);
        }
        write_if_changed(&patched.join(&file), &text);
        cc.file(patched.join(&file));
    }
    cc.file("csrc/cli.c");
    cc.file("csrc/compile.c");
    if wasm {
        cc.file("csrc/wasi/gamma.c");
    }
    cc.compile("jq16");
}

/// Oniguruma's config.h for the target: the sizes configure would measure.
fn onig_config(wasm: bool) -> String {
    let long = if wasm { 4 } else { 8 };
    let mut s = String::new();
    for h in [
        "STDC_HEADERS",
        "HAVE_SYS_TYPES_H",
        "HAVE_SYS_STAT_H",
        "HAVE_STDLIB_H",
        "HAVE_STRING_H",
        "HAVE_MEMORY_H",
        "HAVE_FLOAT_H",
        "HAVE_OFF_T",
        "HAVE_STDINT_H",
        "HAVE_INTTYPES_H",
        "HAVE_STRINGS_H",
        "HAVE_UNISTD_H",
        "HAVE_SYS_TIME_H",
        "HAVE_PROTOTYPES",
        "HAVE_STDARG_PROTOTYPES",
    ] {
        s.push_str(&format!("#define {h} 1\n"));
    }
    s.push_str(&format!(
        "#define SIZEOF_INT 4\n#define SIZEOF_SHORT 2\n#define SIZEOF_LONG {long}\n\
         #define SIZEOF_LONG_LONG 8\n#define SIZEOF_VOIDP {long}\n"
    ));
    s
}

/// Rewriting an unchanged header would recompile every C file on each build.
fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|t| t == text) {
        return;
    }
    fs::write(path, text).expect("OUT_DIR is writable");
}
