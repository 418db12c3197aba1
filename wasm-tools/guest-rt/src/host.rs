//! The tool-call channel as a guest sees it: the host's `call` import, which takes one request
//! frame and answers with one frame written into memory the guest hands out through its
//! exported `host_alloc`. The network door and the spawn door both speak through it.

#[cfg(target_os = "wasi")]
#[link(wasm_import_module = "host")]
unsafe extern "C" {
    #[link_name = "call"]
    fn host_call(req: *const u8, len: u32, out_ptr: *mut u32, out_len: *mut u32) -> i32;
}

/// Room for the host's answer; reclaimed by [`call`].
#[cfg(target_os = "wasi")]
#[unsafe(no_mangle)]
pub extern "C" fn host_alloc(len: u32) -> *mut u8 {
    Box::into_raw(vec![0u8; len as usize].into_boxed_slice()).cast()
}

#[cfg(target_os = "wasi")]
/// Sends one request frame and returns the answer frame, or the channel's code: -1 when the
/// run offers no channel (or none that answers this frame), -2 when the host faulted.
pub fn call(request: &[u8]) -> Result<Vec<u8>, i32> {
    let (mut ptr, mut len) = (0u32, 0u32);
    // SAFETY: the host reads `request` during the call and writes the answer's place into
    // the two locals.
    let rc = unsafe { host_call(request.as_ptr(), request.len() as u32, &mut ptr, &mut len) };
    if rc != 0 {
        return Err(rc);
    }
    // SAFETY: the host filled memory from `host_alloc(len)`, a boxed slice of that length.
    let answer = unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            ptr as *mut u8,
            len as usize,
        ))
    };
    Ok(answer.into_vec())
}

#[cfg(not(target_os = "wasi"))]
/// Sends one request frame and returns the answer frame, or the channel's code: -1 when the
/// run offers no channel (or none that answers this frame), -2 when the host faulted.
pub fn call(_request: &[u8]) -> Result<Vec<u8>, i32> {
    Err(-1)
}
