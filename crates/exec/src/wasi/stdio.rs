//! Standard streams of a guest: bytes or a pipe in, capped buffers or pipes out, and the
//! bounded pipe that connects pipeline stages running concurrently.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use wasmsand_model::CappedBuffer;

use crate::wasi::file::SyncFile;
use crate::wasi::file::{ErrnoSlot, OpenFile, VfsFile};

/// Default bytes a pipe holds before its writer blocks (Linux's default pipe size).
pub const PIPE_CAPACITY: usize = 64 * 1024;

/// Stops a run: set once, it wakes every pipe wait registered with it and makes the runner
/// stop the guest. Cloning shares the token.
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    waiters: Mutex<Vec<Weak<dyn Wakeable>>>,
    /// For a [`CancelToken::child`]: what its parent wakes. Held here, so the parent's weak
    /// reference to it lives exactly as long as the child token.
    link: Mutex<Option<Arc<ChildLink>>>,
}

/// Cancels a child token when its parent is cancelled.
struct ChildLink {
    child: Weak<CancelInner>,
}

impl Wakeable for ChildLink {
    fn wake_all(&self) {
        if let Some(inner) = self.child.upgrade() {
            CancelToken { inner }.cancel();
        }
    }
}

/// Something blocked waits that a cancellation must wake.
pub(crate) trait Wakeable: Send + Sync {
    fn wake_all(&self);
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run using this token (or a clone) and wakes what they wait on; a
    /// second call does nothing.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let waiters = std::mem::take(&mut *self.inner.waiters.lock());
        for w in waiters.iter().filter_map(Weak::upgrade) {
            w.wake_all();
        }
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A token of its own (cancelling it leaves this one alone) that is also cancelled when
    /// this one is: a background job can be killed alone, and still ends with its run.
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        let link = Arc::new(ChildLink {
            child: Arc::downgrade(&child.inner),
        });
        *child.inner.link.lock() = Some(link.clone());
        let weak: Weak<dyn Wakeable> = Arc::downgrade(&link) as Weak<dyn Wakeable>;
        self.register(weak);
        if self.is_cancelled() {
            child.cancel();
        }
        child
    }

    pub(crate) fn register(&self, waiter: Weak<dyn Wakeable>) {
        let mut waiters = self.inner.waiters.lock();
        // Checked under the lock `cancel` takes after setting the flag, so a waiter is either
        // woken by `cancel` or sees the flag itself.
        if self.is_cancelled() {
            return;
        }
        waiters.retain(|w| w.strong_count() > 0);
        waiters.push(waiter);
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

struct PipeState {
    buf: VecDeque<u8>,
    writers: usize,
    readers: usize,
}

struct PipeShared {
    state: Mutex<PipeState>,
    readable: Condvar,
    writable: Condvar,
    capacity: usize,
    cancel: CancelToken,
}

impl Wakeable for PipeShared {
    fn wake_all(&self) {
        // Taking the lock orders the wake after any waiter's check of the flag.
        let _g = self.state.lock();
        self.readable.notify_all();
        self.writable.notify_all();
    }
}

/// Creates a bounded pipe. Writers block while it is full, readers while it is empty and a
/// writer is open; closing every writer gives the reader EOF, closing the reader gives writers
/// `EPIPE`, and cancelling `cancel` wakes both sides with an error.
pub fn pipe(capacity: usize, cancel: &CancelToken) -> (PipeWriter, PipeReader) {
    let shared = Arc::new(PipeShared {
        state: Mutex::new(PipeState {
            buf: VecDeque::new(),
            writers: 1,
            readers: 1,
        }),
        readable: Condvar::new(),
        writable: Condvar::new(),
        capacity: capacity.max(1),
        cancel: cancel.clone(),
    });
    let weak: Weak<dyn Wakeable> = Arc::downgrade(&(shared.clone() as Arc<dyn Wakeable>));
    cancel.register(weak);
    (
        PipeWriter {
            shared: shared.clone(),
        },
        PipeReader { shared },
    )
}

fn cancelled_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "run cancelled")
}

/// The write end of a [`pipe`]. Cloning adds a writer (like `dup`).
pub struct PipeWriter {
    shared: Arc<PipeShared>,
}

impl PipeWriter {
    /// Writes all of `data`, blocking while the pipe is full.
    pub fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write_some(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Writes at least one byte of a non-empty `data`, blocking until there is room.
    pub fn write_some(&self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let s = &self.shared;
        let mut st = s.state.lock();
        loop {
            if s.cancel.is_cancelled() {
                return Err(cancelled_error());
            }
            if st.readers == 0 {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "broken pipe"));
            }
            let room = s.capacity - st.buf.len();
            if room > 0 {
                let n = room.min(data.len());
                st.buf.extend(&data[..n]);
                s.readable.notify_all();
                return Ok(n);
            }
            s.writable.wait(&mut st);
        }
    }
}

impl Clone for PipeWriter {
    fn clone(&self) -> Self {
        self.shared.state.lock().writers += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        st.writers -= 1;
        if st.writers == 0 {
            self.shared.readable.notify_all();
        }
    }
}

impl fmt::Debug for PipeWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PipeWriter")
    }
}

/// The read end of a [`pipe`]. Cloning adds a reader (a shell's `{ read a; cat; }` shares
/// one stdin between a builtin and the programs after it).
pub struct PipeReader {
    shared: Arc<PipeShared>,
}

impl PipeReader {
    /// Reads what is there (at most `buf.len()`), blocking while the pipe is empty and a
    /// writer is open. `Ok(0)` is end of file.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_by(buf, None)
    }

    /// As [`PipeReader::read`], giving up at `deadline` with `ErrorKind::TimedOut` (a
    /// shell's `read -t`).
    pub fn read_until(&self, buf: &mut [u8], deadline: std::time::Instant) -> io::Result<usize> {
        self.read_by(buf, Some(deadline))
    }

    fn read_by(&self, buf: &mut [u8], deadline: Option<std::time::Instant>) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let s = &self.shared;
        let mut st = s.state.lock();
        loop {
            if s.cancel.is_cancelled() {
                return Err(cancelled_error());
            }
            if !st.buf.is_empty() {
                let n = buf.len().min(st.buf.len());
                for (dst, src) in buf.iter_mut().zip(st.buf.drain(..n)) {
                    *dst = src;
                }
                s.writable.notify_all();
                return Ok(n);
            }
            if st.writers == 0 {
                return Ok(0);
            }
            match deadline {
                None => s.readable.wait(&mut st),
                Some(d) => {
                    if s.readable.wait_until(&mut st, d).timed_out() && st.buf.is_empty() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"));
                    }
                }
            }
        }
    }

    /// Reads until end of file.
    pub fn read_to_end(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            match self.read(&mut chunk)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn available(&self) -> usize {
        self.shared.state.lock().buf.len()
    }

    /// Whether a read would return at once: bytes are waiting, or every writer is gone (end
    /// of file), as `select` reports a pipe readable (a shell's `read -t 0`).
    pub fn ready(&self) -> bool {
        let st = self.shared.state.lock();
        !st.buf.is_empty() || st.writers == 0
    }
}

impl Clone for PipeReader {
    fn clone(&self) -> Self {
        self.shared.state.lock().readers += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        st.readers -= 1;
        if st.readers == 0 {
            st.buf.clear();
            self.shared.writable.notify_all();
        }
    }
}

impl fmt::Debug for PipeReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PipeReader")
    }
}

/// Called with each chunk a program writes, while it runs.
pub type ChunkCallback = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// A capped buffer shared by every program writing one stream of a run (all stages of a
/// pipeline write the same stderr), with an optional callback that sees each chunk as it is
/// written, before the cap applies to what is kept.
#[derive(Clone)]
pub struct OutputBuffer {
    inner: Arc<Mutex<CappedBuffer>>,
    on_chunk: Option<ChunkCallback>,
}

impl OutputBuffer {
    /// A buffer keeping the first `cap` bytes (see [`CappedBuffer`]).
    pub fn new(cap: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(CappedBuffer::new(cap))),
            on_chunk: None,
        }
    }

    /// A shared buffer over `buffer` (e.g. a head + tail one, [`CappedBuffer::head_tail`]).
    pub fn from_buffer(buffer: CappedBuffer) -> Self {
        Self {
            inner: Arc::new(Mutex::new(buffer)),
            on_chunk: None,
        }
    }

    /// Also hands every chunk to `callback` as it is written. Only chunks that were at least
    /// partly kept are streamed, so a callback never sees more than the cap either.
    pub fn with_callback(mut self, callback: ChunkCallback) -> Self {
        self.on_chunk = Some(callback);
        self
    }

    /// Keeps what fits; returns how many bytes were offered (all of them: a program writing
    /// past the cap is not disturbed, its bytes are counted and dropped).
    pub fn write(&self, data: &[u8]) -> usize {
        let kept = self.inner.lock().write(data);
        if kept > 0
            && let Some(cb) = &self.on_chunk
        {
            cb(&data[..kept]);
        }
        data.len()
    }

    /// A copy of the buffer as it stands.
    pub fn snapshot(&self) -> CappedBuffer {
        self.inner.lock().clone()
    }

    /// Takes the contents, leaving an empty buffer with the same cap and mode.
    pub fn take(&self) -> CappedBuffer {
        let mut g = self.inner.lock();
        let empty = g.emptied();
        std::mem::replace(&mut *g, empty)
    }
}

impl fmt::Debug for OutputBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputBuffer")
            .field("len", &self.inner.lock().len())
            .finish()
    }
}

/// Where a program's standard input comes from.
#[derive(Debug)]
pub enum Input {
    /// Immediate end of file (like `< /dev/null`).
    Empty,
    /// These bytes, then end of file; each program reads them from the start.
    Bytes(Bytes),
    /// Bytes several programs read in turn (a shell's here-document or a run's stdin): each
    /// reads from where the last one stopped, and seeks like a file, so `cat f; tr a-z A-Z`
    /// leaves the input to `tr` as bash's does.
    Cursor(ByteCursor),
    /// The read end of a pipe (a pipeline stage); end of file once every writer is dropped.
    Pipe(PipeReader),
    /// A VFS file (`< file`): seekable, as a redirected file is.
    File(OpenFile),
}

/// Input bytes and the position the next read starts at, shared by whoever reads them.
pub type ByteCursor = Arc<Mutex<(Bytes, usize)>>;

/// Where a program's standard output or error goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// Discarded (like `> /dev/null`).
    Null,
    /// Kept, up to the buffer's cap, for the caller to read after the run.
    Buffer(OutputBuffer),
    /// The write end of a pipe; writes block while it is full, and a write after the reader
    /// is gone ends the program with status 141 (SIGPIPE).
    Pipe(Arc<PipeWriter>),
    /// A VFS file (`> file`, `>> file`); VFS limits apply to what the program writes.
    File(OpenFile),
}

impl From<PipeWriter> for Output {
    fn from(w: PipeWriter) -> Self {
        Output::Pipe(Arc::new(w))
    }
}

impl From<OutputBuffer> for Output {
    fn from(b: OutputBuffer) -> Self {
        Output::Buffer(b)
    }
}

fn read_at(b: &Bytes, pos: &mut usize, buf: &mut [u8]) -> usize {
    let start = (*pos).min(b.len());
    let n = buf.len().min(b.len() - start);
    buf[..n].copy_from_slice(&b[start..start + n]);
    *pos = start + n;
    n
}

fn seek_in(b: &Bytes, cur: &mut usize, pos: SeekFrom) -> io::Result<u64> {
    let len = b.len() as i64;
    let new = match pos {
        SeekFrom::Start(n) => n as i64,
        SeekFrom::Current(d) => *cur as i64 + d,
        SeekFrom::End(d) => len + d,
    };
    if new < 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "negative seek"));
    }
    *cur = (new as usize).min(b.len());
    Ok(new as u64)
}

#[derive(Debug)]
pub(crate) struct StdinFile {
    pub(crate) input: InputState,
}

#[derive(Debug)]
pub(crate) enum InputState {
    Empty,
    Bytes(Bytes, usize),
    Cursor(ByteCursor),
    Pipe(PipeReader),
    File(VfsFile),
}

impl StdinFile {
    pub(crate) fn new(input: Input, errno: &Arc<ErrnoSlot>) -> Self {
        Self {
            input: match input {
                Input::Empty => InputState::Empty,
                Input::Bytes(b) => InputState::Bytes(b, 0),
                Input::Cursor(c) => InputState::Cursor(c),
                Input::Pipe(p) => InputState::Pipe(p),
                Input::File(f) => InputState::File(f.handle(errno.clone())),
            },
        }
    }
}

impl SyncFile for StdinFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.input {
            InputState::Empty => Ok(0),
            InputState::Bytes(b, pos) => Ok(read_at(b, pos, buf)),
            InputState::Cursor(c) => {
                let mut g = c.lock();
                let (b, pos) = &mut *g;
                Ok(read_at(b, pos, buf))
            }
            InputState::Pipe(p) => p.read(buf),
            InputState::File(f) => f.read(buf),
        }
    }

    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "stdin is read-only",
        ))
    }

    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        // Seeking works on byte input (a here-doc is a file to a program, as in bash).
        match &mut self.input {
            InputState::Bytes(b, cur) => seek_in(b, cur, pos),
            InputState::Cursor(c) => {
                let mut g = c.lock();
                let (b, cur) = &mut *g;
                seek_in(b, cur, pos)
            }
            InputState::Empty => Ok(0),
            InputState::Pipe(_) => Err(io::Error::other("illegal seek on a pipe")),
            InputState::File(f) => f.seek(pos),
        }
    }

    fn size(&self) -> u64 {
        match &self.input {
            InputState::Bytes(b, _) => b.len() as u64,
            InputState::Cursor(c) => c.lock().0.len() as u64,
            InputState::File(f) => f.size(),
            _ => 0,
        }
    }

    fn read_ready(&self) -> usize {
        match &self.input {
            InputState::Bytes(b, pos) => (b.len() - pos).max(1),
            InputState::Cursor(c) => {
                let g = c.lock();
                g.0.len().saturating_sub(g.1).max(1)
            }
            InputState::Pipe(p) => p.available().max(1),
            InputState::File(f) => f.read_ready(),
            InputState::Empty => 1,
        }
    }

    fn special_fd(&self) -> Option<u32> {
        Some(0)
    }
}

/// What a run's writers share about a pipe whose reader is gone.
///
/// Linux kills a writer with SIGPIPE at the first write to such a pipe; GNU tools rely on
/// that and never report the error themselves. A guest here gets `EPIPE` from the write, and
/// the same write queues SIGPIPE on its wasix process, which wasix acts on at the guest's next
/// system call (before that call does anything): the guest ends there, before any
/// `write failed: Broken pipe` it would print, and the status is 141 as in a shell.
#[derive(Default)]
pub(crate) struct PipeBreak {
    hit: AtomicBool,
    process: Mutex<Option<wasmer_wasix::WasiProcess>>,
}

impl PipeBreak {
    /// The process to signal; known only once the wasix environment exists. A kept instance
    /// gets a new environment, and this is cleared, for each run.
    pub(crate) fn attach(&self, process: wasmer_wasix::WasiProcess) {
        self.hit.store(false, Ordering::SeqCst);
        *self.process.lock() = Some(process);
    }

    pub(crate) fn happened(&self) -> bool {
        self.hit.load(Ordering::SeqCst)
    }

    fn hit(&self) {
        self.hit.store(true, Ordering::SeqCst);
        let process = self.process.lock().clone();
        if let Some(p) = process {
            p.signal_process(wasmer_wasix::types::wasi::Signal::Sigpipe);
        }
    }
}

impl fmt::Debug for PipeBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeBreak")
            .field("hit", &self.happened())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) struct OutputFile {
    sink: Sink,
    fd: u32,
    broken_pipe: Arc<PipeBreak>,
}

#[derive(Debug)]
enum Sink {
    Null,
    Buffer(OutputBuffer),
    Pipe(Arc<PipeWriter>),
    File(VfsFile),
}

impl OutputFile {
    pub(crate) fn new(
        output: &Output,
        fd: u32,
        errno: &Arc<ErrnoSlot>,
        broken_pipe: &Arc<PipeBreak>,
    ) -> Self {
        let sink = match output {
            Output::Null => Sink::Null,
            Output::Buffer(b) => Sink::Buffer(b.clone()),
            Output::Pipe(p) => Sink::Pipe(p.clone()),
            Output::File(f) => Sink::File(f.handle(errno.clone())),
        };
        Self {
            sink,
            fd,
            broken_pipe: broken_pipe.clone(),
        }
    }
}

impl SyncFile for OutputFile {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "output stream is write-only",
        ))
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Sink::Null => Ok(buf.len()),
            Sink::Buffer(b) => Ok(b.write(buf)),
            Sink::Pipe(p) => p.write_some(buf).inspect_err(|e| {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    self.broken_pipe.hit();
                }
            }),
            Sink::File(f) => f.write(buf),
        }
    }

    fn special_fd(&self) -> Option<u32> {
        Some(self.fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn a_child_token_is_cancelled_with_its_parent_but_not_the_other_way() {
        let parent = CancelToken::new();
        let a = parent.child();
        let b = parent.child();
        a.cancel();
        assert!(a.is_cancelled() && !parent.is_cancelled() && !b.is_cancelled());
        // A pipe wait on the child wakes when the parent is cancelled.
        let (_w, r) = pipe(8, &b);
        let t = thread::spawn(move || r.read(&mut [0u8; 4]));
        thread::sleep(Duration::from_millis(20));
        parent.cancel();
        assert!(b.is_cancelled());
        assert!(
            t.join().unwrap().is_err(),
            "the blocked read ends as cancelled"
        );
        assert!(
            parent.child().is_cancelled(),
            "a child of a cancelled token starts cancelled"
        );
    }

    #[test]
    fn pipe_moves_bytes_and_ends_with_eof() {
        let cancel = CancelToken::new();
        let (w, r) = pipe(8, &cancel);
        let t = thread::spawn(move || {
            w.write_all(b"hello, bounded world").unwrap();
        });
        assert_eq!(r.read_to_end().unwrap(), b"hello, bounded world");
        t.join().unwrap();
    }

    #[test]
    fn writer_blocks_when_full_and_gets_epipe_when_reader_leaves() {
        let cancel = CancelToken::new();
        let (w, r) = pipe(4, &cancel);
        assert_eq!(w.write_some(b"123456").unwrap(), 4);
        let t = thread::spawn(move || w.write_some(b"x"));
        thread::sleep(Duration::from_millis(50));
        assert!(!t.is_finished(), "a full pipe blocks its writer");
        drop(r);
        let err = t.join().unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn cancel_wakes_blocked_reader_and_writer() {
        let cancel = CancelToken::new();
        let (w, r) = pipe(1, &cancel);
        let (w2, _r2) = pipe(1, &cancel);
        w2.write_some(b"x").unwrap();
        let reader = thread::spawn(move || {
            let _keep = w;
            r.read(&mut [0u8; 4])
        });
        let writer = thread::spawn(move || w2.write_some(b"y"));
        thread::sleep(Duration::from_millis(50));
        cancel.cancel();
        assert_eq!(
            reader.join().unwrap().unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        assert_eq!(
            writer.join().unwrap().unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
    }

    #[test]
    fn pipe_made_after_cancel_fails_at_once() {
        let cancel = CancelToken::new();
        cancel.cancel();
        let (_w, r) = pipe(4, &cancel);
        assert!(r.read(&mut [0u8; 1]).is_err());
    }

    #[test]
    fn output_buffer_streams_only_what_it_keeps() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let out = OutputBuffer::new(5).with_callback(Arc::new(move |c| {
            s2.lock().extend_from_slice(c);
        }));
        assert_eq!(out.write(b"abc"), 3);
        assert_eq!(out.write(b"defgh"), 5);
        assert_eq!(out.write(b"ijk"), 3);
        assert_eq!(&*seen.lock(), b"abcde");
        let snap = out.snapshot();
        assert!(snap.truncated());
        assert_eq!(snap.total_written(), 11);
    }
}
