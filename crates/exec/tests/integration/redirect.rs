//! Standard streams connected to VFS files, as shell redirections will use them: `> f`,
//! `>> f`, `> f 2>&1` (one shared offset), `< f`, and VFS limits on what is written.

use crate::common;

use common::*;
use wasmsand_exec::{Exit, Input, OpenFile, Output, OutputBuffer, RunSpec};
use wasmsand_vfs::VfsOptions;

#[test]
fn stdout_to_a_file_and_append() {
    let vfs = vfs();
    vfs.lock()
        .write("/home/user/out.txt", "old content\n")
        .unwrap();
    vfs.lock().truncate("/home/user/out.txt", 0).unwrap();
    let mut spec = RunSpec::new(vfs.clone(), ["seq", "3"]);
    spec.stdout = Output::File(OpenFile::new(vfs.clone(), "/home/user/out.txt", false));
    assert_eq!(
        exec().run(&program("seq"), spec).unwrap().exit,
        Exit::Code(0)
    );
    let mut spec = RunSpec::new(vfs.clone(), ["seq", "4", "5"]);
    spec.stdout = Output::File(OpenFile::new(vfs.clone(), "/home/user/out.txt", true));
    assert_eq!(
        exec().run(&program("seq"), spec).unwrap().exit,
        Exit::Code(0)
    );
    assert_eq!(
        &vfs.lock().read("/home/user/out.txt").unwrap()[..],
        b"1\n2\n3\n4\n5\n"
    );
}

#[test]
fn stdout_and_stderr_share_one_offset() {
    let vfs = vfs();
    vfs.lock().write("/home/user/both.txt", "").unwrap();
    let file = OpenFile::new(vfs.clone(), "/home/user/both.txt", false);
    // `cat good missing good > both.txt 2>&1`: output and error interleave in order.
    vfs.lock().write("/home/user/good", "data\n").unwrap();
    let mut spec = RunSpec::new(vfs.clone(), ["cat", "good", "missing", "good"]);
    spec.cwd = "/home/user".into();
    spec.stdout = Output::File(file.clone());
    spec.stderr = Output::File(file);
    let r = exec().run(&program("cat"), spec).unwrap();
    assert_eq!(r.exit, Exit::Code(1));
    // Each stream lands after the other's bytes: with separate offsets the later writer would
    // overwrite the earlier one. (uutils cat buffers its output, so the order is not GNU's.)
    let text =
        String::from_utf8_lossy(&vfs.lock().read("/home/user/both.txt").unwrap()).into_owned();
    let err = "cat: missing: No such file or directory\n";
    assert_eq!(text.len(), 2 * "data\n".len() + err.len(), "{text:?}");
    assert_eq!(text.matches("data\n").count(), 2, "{text:?}");
    assert!(text.contains(err), "{text:?}");
}

#[test]
fn stdin_from_a_file_is_seekable_and_shared() {
    let vfs = vfs();
    vfs.lock()
        .write("/home/user/in.txt", "one\ntwo\nthree\n")
        .unwrap();
    let input = OpenFile::new(vfs.clone(), "/home/user/in.txt", false);
    let out = OutputBuffer::new(1024);
    let mut spec = RunSpec::new(vfs.clone(), ["wc", "-l"]);
    spec.stdin = Input::File(input);
    spec.stdout = out.clone().into();
    assert_eq!(
        exec().run(&program("wc"), spec).unwrap().exit,
        Exit::Code(0)
    );
    assert_eq!(out.snapshot().to_text().text, "3\n");
    // A second program reading the same open file continues at the shared offset: the first
    // consumed everything, so nothing is read twice.
    let shared = OpenFile::new(vfs.clone(), "/home/user/in.txt", false);
    let first = OutputBuffer::new(1024);
    let mut spec = RunSpec::new(vfs.clone(), ["cat"]);
    spec.stdin = Input::File(shared.clone());
    spec.stdout = first.clone().into();
    exec().run(&program("cat"), spec).unwrap();
    let rest = OutputBuffer::new(1024);
    let mut spec = RunSpec::new(vfs.clone(), ["cat"]);
    spec.stdin = Input::File(shared);
    spec.stdout = rest.clone().into();
    exec().run(&program("cat"), spec).unwrap();
    assert_eq!(first.snapshot().to_text().text, "one\ntwo\nthree\n");
    assert_eq!(rest.snapshot().to_text().text, "");
    // A redirected file can be seeked, which `tail` does.
    let out = OutputBuffer::new(1024);
    let mut spec = RunSpec::new(vfs.clone(), ["tail", "-c", "6"]);
    spec.stdin = Input::File(OpenFile::new(vfs.clone(), "/home/user/in.txt", false));
    spec.stdout = out.clone().into();
    assert_eq!(
        exec().run(&program("tail"), spec).unwrap().exit,
        Exit::Code(0)
    );
    assert_eq!(out.snapshot().to_text().text, "three\n");
}

// Threat: T-EXHAUST-FILES (docs/security.md)
#[test]
fn writing_past_the_byte_limit_through_a_redirection_fails_with_enospc() {
    let vfs = vfs_with(VfsOptions {
        fs_limit_bytes: Some(100),
        ..Default::default()
    });
    vfs.lock().write("/home/user/big.txt", "").unwrap();
    let err = OutputBuffer::new(4096);
    let mut spec = RunSpec::new(vfs.clone(), ["seq", "1000"]);
    spec.stdout = Output::File(OpenFile::new(vfs.clone(), "/home/user/big.txt", false));
    spec.stderr = err.clone().into();
    let r = exec().run(&program("seq"), spec).unwrap();
    assert_ne!(r.exit, Exit::Code(0));
    let msg = err.snapshot().to_text().text;
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(vfs.lock().usage().bytes_used <= 100);
}
