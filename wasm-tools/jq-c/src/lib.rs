//! jq 1.6's C (Debian's jq, the reference), compiled by build.rs, and the ways into it: jq's
//! command line for the `jq` guest (and yq over it), and jq's compiler alone for the host's
//! fuzz target of jq's filter parser (crates/fuzz). Its own crate so that the host build of
//! the C pulls in none of the guest's Rust dependencies.

use std::ffi::{CString, OsString, c_char, c_int, c_void};

unsafe extern "C" {
    fn wasmsand_jq(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn wasmsand_jq_captured(
        argc: c_int,
        argv: *mut *mut c_char,
        out: *mut *mut c_char,
        len: *mut usize,
    ) -> c_int;
    fn wasmsand_jq_compile(
        filter: *const c_char,
        errors: *mut *mut c_char,
        len: *mut usize,
    ) -> c_int;
    fn wasmsand_jq_prepare() -> c_int;
    fn wasmsand_jq_definitions(
        filter: *const c_char,
        original: c_int,
        out: *mut *mut c_char,
        len: *mut usize,
    ) -> c_int;
    fn free(p: *mut c_void);
}

/// Makes jq's builtins ahead of time, for the next program this instance compiles (jq makes
/// them for every program otherwise, which is most of a short run); false when there was no
/// memory.
pub fn prepare_builtins() -> bool {
    // SAFETY: no arguments; it allocates a jq state and the builtins and keeps both.
    unsafe { wasmsand_jq_prepare() == 0 }
}

/// argv as C strings, `jq` first (jq names itself with it in its usage text). An argument
/// holding a NUL byte is cut there, as an exec would cut it.
fn c_args(args: &[OsString]) -> Vec<CString> {
    std::iter::once(OsString::from("jq"))
        .chain(args.iter().cloned())
        .map(|a| {
            let mut bytes = a.into_encoded_bytes();
            if let Some(nul) = bytes.iter().position(|b| *b == 0) {
                bytes.truncate(nul);
            }
            CString::new(bytes).expect("NUL bytes were cut")
        })
        .collect()
}

/// Runs jq's command line, its results on stdout; returns its exit status.
pub fn jq(args: &[OsString]) -> i32 {
    let owned = c_args(args);
    let mut argv: Vec<*mut c_char> = owned.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    // SAFETY: argv is a NULL-terminated array of NUL-terminated strings that outlive the call
    // (`owned`); jq's main may reorder the pointers but writes into no string.
    unsafe { wasmsand_jq((argv.len() - 1) as c_int, argv.as_mut_ptr()) }
}

/// Runs jq's command line with its results gathered instead of written: (status, results).
pub fn jq_captured(args: &[OsString]) -> (i32, Vec<u8>) {
    let owned = c_args(args);
    let mut argv: Vec<*mut c_char> = owned.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut out: *mut c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: as in `jq`; `out` and `len` are valid for writes, and on return they describe
    // what `take_buffer` asks for.
    unsafe {
        let code = wasmsand_jq_captured(
            (argv.len() - 1) as c_int,
            argv.as_mut_ptr(),
            &mut out,
            &mut len,
        );
        (code, take_buffer(out, len))
    }
}

/// The bytes of a buffer a C call handed over, which is then freed.
///
/// # Safety
/// `out` is NULL or a malloc'd buffer of at least `len` bytes that nothing else frees.
unsafe fn take_buffer(out: *mut c_char, len: usize) -> Vec<u8> {
    if out.is_null() {
        return Vec::new();
    }
    // SAFETY: as the caller promises.
    unsafe {
        let bytes = std::slice::from_raw_parts(out.cast::<u8>(), len).to_vec();
        free(out.cast());
        bytes
    }
}

/// What compiling a filter came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// jq has a program: its command line would run it. Without one it exits 3.
    pub program: bool,
    /// What jq said, one message per line, as its command line prints them on stderr.
    pub messages: String,
}

/// Compiles `filter` as jq's command line would and runs nothing; `None` when there was no
/// memory to start. A NUL byte ends the filter, as it ends an argument.
pub fn compile(filter: &[u8]) -> Option<Compiled> {
    let end = filter.iter().position(|b| *b == 0).unwrap_or(filter.len());
    let filter = CString::new(&filter[..end]).expect("cut at the first NUL");
    let mut out: *mut c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: `filter` is NUL-terminated and outlives the call; `out` and `len` are valid for
    // writes, and on return they describe what `take_buffer` asks for.
    let (code, messages) = unsafe {
        let code = wasmsand_jq_compile(filter.as_ptr(), &mut out, &mut len);
        (code, take_buffer(out, len))
    };
    (code >= 0).then(|| Compiled {
        program: code == 1,
        messages: String::from_utf8_lossy(&messages).into_owned(),
    })
}

/// The definitions jq keeps in `filter`'s program once every builtin is bound in and the
/// unreferenced ones are dropped, in order, one `name/arity` per line: by this crate's one-walk
/// version, or by jq's own when `original` (the two must agree). `None` when the filter does
/// not parse or bind, or there was no memory.
pub fn kept_definitions(filter: &str, original: bool) -> Option<String> {
    let filter = CString::new(filter.split('\0').next().unwrap_or_default()).ok()?;
    let mut out: *mut c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: as in `compile`.
    let (code, text) = unsafe {
        let code = wasmsand_jq_definitions(filter.as_ptr(), original.into(), &mut out, &mut len);
        (code, take_buffer(out, len))
    };
    (code == 0).then(|| String::from_utf8_lossy(&text).into_owned())
}

/// jq 1.6's own test file (`tests/jq.test` of the sources built here): filters with the results
/// they give, and `%%FAIL` filters with the message jq refuses them with.
pub const JQ_TESTS: &str = concat!(env!("WASM_JQ_SRC"), "/tests/jq.test");
