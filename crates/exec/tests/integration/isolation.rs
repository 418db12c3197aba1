//! Nothing a guest does reaches the host: not its stdout/stderr, not its files, not the
//! network; the guest's `/` is exactly the sandbox's tree.

use crate::common;

use std::process::Command;

use common::*;
use wasmsand_exec::{Exit, OutputBuffer, RunSpec};

const MARKER: &str = "GUEST-WROTE-THIS-7f3a";

/// Writes the marker to fd 1 and fd 2 with plain WASI calls.
fn marker_guest() -> wasmsand_exec::Program {
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "fd_write"
            (func $fd_write (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (data (i32.const 64) "{MARKER}\n")
          (func (export "_start")
            (i32.store (i32.const 0) (i32.const 64))
            (i32.store (i32.const 4) (i32.const {len}))
            (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))
            (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 16)))))"#,
        len = MARKER.len() + 1
    );
    exec().load(wat.as_bytes()).unwrap()
}

// Threat: T-ESCAPE-STDIO (docs/security.md)
#[test]
fn guest_stdio_never_reaches_the_host_process() {
    if std::env::var_os("WASMSAND_ISOLATION_CHILD").is_some() {
        // Child: run the guest with its output captured, and with output discarded.
        let out = OutputBuffer::new(4096);
        let mut spec = RunSpec::new(vfs(), ["marker"]);
        spec.stdout = out.clone().into();
        let r = exec().run(&marker_guest(), spec).unwrap();
        assert_eq!(r.exit, Exit::Code(0));
        assert!(out.snapshot().to_text().text.contains(MARKER));
        let r = exec()
            .run(&marker_guest(), RunSpec::new(vfs(), ["marker"]))
            .unwrap();
        assert_eq!(r.exit, Exit::Code(0));
        return;
    }
    // Parent: run this same test in a child process and inspect the child's own stdout and
    // stderr, where a leak would land.
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "isolation::guest_stdio_never_reaches_the_host_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WASMSAND_ISOLATION_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child really ran: {stdout}"
    );
    assert!(!stdout.contains(MARKER), "guest stdout leaked: {stdout}");
    assert!(!stderr.contains(MARKER), "guest stderr leaked: {stderr}");
}

#[test]
fn root_is_exactly_the_sandbox_tree() {
    let vfs = vfs();
    let r = run_in(&vfs, "/", &["ls", "-a", "/"], b"");
    assert_eq!(r.exit, Exit::Code(0), "{}", r.stderr);
    let names: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        names,
        [".", "..", "bin", "dev", "etc", "home", "tmp", "usr"]
    );
}

// Threat: T-ESCAPE-FS (docs/security.md)
#[test]
fn host_files_are_unreachable() {
    let vfs = vfs();
    for path in [
        "/etc/hostname",
        "/proc/self/environ",
        "../../../../etc/passwd",
    ] {
        let r = run(&vfs, &["cat", path], b"");
        assert_eq!(r.exit, Exit::Code(1), "{path}: {}", r.stdout);
        assert!(r.stdout.is_empty());
        assert!(
            r.stderr.contains("No such file or directory"),
            "{}",
            r.stderr
        );
    }
    // Escaping with `..` from the root lands on the root.
    let r = run_in(&vfs, "/", &["ls", "../../.."], b"");
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        ["bin", "dev", "etc", "home", "tmp", "usr"]
    );
}

#[test]
fn guest_sees_only_the_environment_it_is_given() {
    let vfs = vfs();
    // The host's environment is large; the guest sees only what it was given (and PWD).
    assert!(std::env::var_os("PATH").is_some());
    let r = run(&vfs, &["printenv"], b"");
    assert_eq!(
        r.stdout,
        "HOME=/home/user\nPATH=/bin:/usr/bin\nTZ=UTC\nLC_ALL=C\nPWD=/home/user\n"
    );
}

/// A module whose `probe` checks that its memory is exactly its initial image (size, data
/// segment, zeroes everywhere else), then grows it and fills all of it with garbage.
fn scribbler(pages: u32, offset: u32) -> wasmsand_exec::Program {
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
          (memory (export "memory") {pages})
          (data (i32.const {offset}) "seed")
          (func (export "probe") (result i32)
            (local $i i32)
            (if (i32.ne (memory.size) (i32.const {pages})) (then (return (i32.const 1))))
            (if (i32.ne (i32.load (i32.const {offset})) (i32.const 0x64656573))
              (then (return (i32.const 2))))
            (i32.store (i32.const {offset}) (i32.const 0))
            (block $done
              (loop $scan
                (br_if $done (i32.ge_u (local.get $i) (i32.const {bytes})))
                (if (i32.load (local.get $i)) (then (return (i32.const 3))))
                (local.set $i (i32.add (local.get $i) (i32.const 4)))
                (br $scan)))
            (drop (memory.grow (i32.const 3)))
            (memory.fill (i32.const 0) (i32.const 0xab) (i32.mul (memory.size) (i32.const 65536)))
            (i32.const 0)))"#,
        bytes = pages * 65536
    );
    exec().load(wat.as_bytes()).unwrap()
}

// Threat: T-LEAK-RUNS (docs/security.md)
#[test]
fn memory_of_one_run_never_reaches_the_next() {
    // Linear memories are reused between runs; each run must still start from its module's
    // initial image, whichever module used the memory before.
    let small = scribbler(2, 1000);
    let large = scribbler(5, 200_000);
    for (i, program) in [&small, &large, &small, &small, &large, &large, &small]
        .into_iter()
        .enumerate()
    {
        let mut spec = RunSpec::new(vfs(), ["probe"]);
        spec.entry = Some("probe".into());
        let r = exec().run(program, spec).unwrap();
        assert_eq!(r.exit, Exit::Code(0), "run {i}");
    }
}

/// A module with more data than the memory-image threshold (so instantiation maps an image):
/// `filler` bytes of `fill`, then one byte 42 eight bytes past them. `_start` exits with that
/// byte plus a byte past the image, then writes both; with an argument it grows the memory
/// instead and exits with (then writes) the new page's first byte. 5 MiB of filler makes an
/// image reset on a thread of its own, 256 KiB one reset on the run's thread.
fn image_guest(filler: usize, fill: u8) -> wasmsand_exec::Program {
    let marker = filler + 8;
    let image_end = (marker + 1).div_ceil(4096) * 4096;
    let sizes = image_end + 8192;
    let past = sizes + 65536;
    let pages = (past + 2 * 65536) / 65536 + 1;
    let grown = pages * 65536;
    let filler = format!("\\{fill:02x}").repeat(filler);
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (import "wasi_snapshot_preview1" "args_sizes_get"
            (func $sizes (param i32 i32) (result i32)))
          (memory (export "memory") {pages})
          (data (i32.const 0) "{filler}")
          (data (i32.const {marker}) "\2a")
          (func (export "_start")
            (local $v i32)
            (drop (call $sizes (i32.const {sizes}) (i32.const {sizes_len})))
            (if (i32.gt_u (i32.load (i32.const {sizes})) (i32.const 1))
              (then
                (drop (memory.grow (i32.const 1)))
                (local.set $v (i32.load8_u (i32.const {grown})))
                (i32.store8 (i32.const {grown}) (i32.const 55))
                (call $exit (local.get $v))))
            ;; 42 from the image plus what lies past the image (zero unless a run leaked).
            (local.set $v (i32.add (i32.load8_u (i32.const {marker}))
                                   (i32.load8_u (i32.const {past}))))
            (i32.store8 (i32.const {marker}) (i32.const 43))
            (i32.store8 (i32.const {past}) (i32.const 99))
            (i32.store8 (i32.const {last}) (i32.const 77))
            (call $exit (local.get $v))))"#,
        sizes_len = sizes + 4,
        last = grown - 1,
    );
    exec()
        .load(&wasmer::wat2wasm(wat.as_bytes()).unwrap())
        .unwrap()
}

// Threat: T-LEAK-RUNS (docs/security.md)
#[test]
fn memory_images_start_every_run_pristine() {
    for filler in [5 << 20, 256 << 10] {
        images_start_every_run_pristine(image_guest(filler, 1));
    }
}

fn images_start_every_run_pristine(program: wasmsand_exec::Program) {
    let exit = |args: &[&str]| {
        exec()
            .run(&program, RunSpec::new(vfs(), args.iter().copied()))
            .unwrap()
            .exit
    };
    // Each run sees the image's 42 though every run before it wrote 43 there, and zeroes
    // past the image though runs wrote there too: from one thread, and from many at once
    // (each taking whatever reservation the pool hands it).
    for _ in 0..20 {
        assert_eq!(exit(&["g"]), Exit::Code(42));
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let program = program.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let r = exec().run(&program, RunSpec::new(vfs(), ["g"])).unwrap();
                    assert_eq!(r.exit, Exit::Code(42));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Memory grown past the initial size reads as zero, even where an earlier run of the same
    // reservation had grown and written there.
    for _ in 0..3 {
        assert_eq!(exit(&["g", "grow"]), Exit::Code(0));
    }
}

/// A module that prints its argv and then its environment, each string as WASI hands it out
/// (NUL-terminated); `extra` adds imports.
fn argv_printer(extra: &str) -> wasmsand_exec::Program {
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "args_sizes_get" (func $asz (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "args_get" (func $aget (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "environ_sizes_get" (func $esz (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "environ_get" (func $eget (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_write"
            (func $fd_write (param i32 i32 i32 i32) (result i32)))
          {extra}
          (memory (export "memory") 2)
          (func $print (param $sizes i32) (param $get i32)
            ;; count at 0, bytes at 4; pointers at 1024, strings at 8192; iovec at 16
            (drop (call_indirect (type $two) (i32.const 0) (i32.const 4) (local.get $sizes)))
            (drop (call_indirect (type $two) (i32.const 1024) (i32.const 8192) (local.get $get)))
            (i32.store (i32.const 16) (i32.const 8192))
            (i32.store (i32.const 20) (i32.load (i32.const 4)))
            (drop (call $fd_write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24))))
          (type $two (func (param i32 i32) (result i32)))
          (table 4 funcref)
          (elem (i32.const 0) $asz $aget $esz $eget)
          (func (export "_start")
            (call $print (i32.const 0) (i32.const 1))
            (call $print (i32.const 2) (i32.const 3))))"#
    );
    exec().load(wat.as_bytes()).unwrap()
}

#[test]
fn argv_and_environment_are_the_runs_whether_the_instance_binds_late_or_not() {
    let vfs = vfs();
    // The second has a start function, so its instances get the run's argv from wasix's
    // builder (as do those of modules importing wasix's own calls); the first's are made
    // before their run is bound and answer from the binding.
    let late = argv_printer("");
    let for_run = argv_printer("(func $nop) (start $nop)");
    for program in [&late, &for_run] {
        // Several runs, each with its own argv and environment.
        for n in 0..4 {
            let out = OutputBuffer::new(4096);
            let mut spec = RunSpec::new(
                vfs.clone(),
                ["prog".to_string(), format!("arg{n}"), "é x".into()],
            );
            spec.env = vec![
                ("A".into(), format!("{n}")),
                ("EMPTY".into(), String::new()),
            ];
            spec.cwd = "/tmp".into();
            spec.stdout = out.clone().into();
            let r = exec().run(program, spec).unwrap();
            assert_eq!(r.exit, Exit::Code(0));
            assert_eq!(
                out.snapshot().as_bytes(),
                format!("prog\0arg{n}\0é x\0A={n}\0EMPTY=\0PWD=/tmp\0").as_bytes()
            );
        }
    }
    // A NUL inside an argument or an `=` in a name cannot be handed to a program.
    for program in [&late, &for_run] {
        let spec = RunSpec::new(vfs.clone(), ["prog", "a\0b"]);
        assert!(exec().run(program, spec).is_err());
        let mut spec = RunSpec::new(vfs.clone(), ["prog"]);
        spec.env = vec![("A=B".into(), "c".into())];
        assert!(exec().run(program, spec).is_err());
    }
}

/// A start function runs inside instantiation, before the run is bound: such a module gets its
/// argv from wasix's builder, and its start function's effects are its run's.
#[test]
fn a_module_with_a_start_function_still_runs() {
    let wat = r#"(module
      (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
      (memory (export "memory") 1)
      (global $g (mut i32) (i32.const 0))
      (func $init (global.set $g (i32.const 7)))
      (start $init)
      (func (export "_start") (call $exit (global.get $g))))"#;
    let program = exec().load(wat.as_bytes()).unwrap();
    for _ in 0..3 {
        let r = exec()
            .run(&program, RunSpec::new(vfs(), ["start"]))
            .unwrap();
        assert_eq!(r.exit, Exit::Code(7));
    }
}

// Threat: T-LEAK-RUNS (docs/security.md)
#[test]
fn more_images_than_the_pool_keeps_each_start_pristine() {
    // Regions of one image serve that image only; with more images in turn than the pool
    // keeps, regions are dropped and made again, and every run still starts from its own.
    let programs: Vec<_> = (0..16u8).map(|i| image_guest(128 << 10, i + 1)).collect();
    for _ in 0..3 {
        for program in &programs {
            let r = exec().run(program, RunSpec::new(vfs(), ["g"])).unwrap();
            assert_eq!(r.exit, Exit::Code(42));
        }
    }
}

/// A module that an instance put back in place may serve again (an image: 64 KiB of data; its
/// state only its memory and globals). `_start` exits with the descriptor its open of `/tmp/k`
/// got (5: the first after the streams and wasix's two roots), plus 100 when its mutable global
/// is not the module's 1000, plus 50 when the open failed; before that it leaves the global at
/// 5 and the descriptor open, and exits from a call three deep. With an argument it traps.
fn kept_guest() -> wasmsand_exec::Program {
    let filler = "\\01".repeat(64 << 10);
    let wat = format!(
        r#"(module
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (import "wasi_snapshot_preview1" "args_sizes_get"
            (func $sizes (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "path_open"
            (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
          (memory (export "memory") 4)
          (data (i32.const 0) "{filler}")
          (data (i32.const 70000) "tmp/k")
          (global $g (mut i32) (i32.const 1000))
          (func $down (param $n i32) (param $code i32)
            (if (local.get $n)
              (then (call $down (i32.sub (local.get $n) (i32.const 1)) (local.get $code))))
            (call $exit (local.get $code)))
          (func (export "_start")
            (local $code i32)
            (drop (call $sizes (i32.const 70100) (i32.const 70104)))
            (if (i32.gt_u (i32.load (i32.const 70100)) (i32.const 1)) (then unreachable))
            (if (i32.ne (global.get $g) (i32.const 1000))
              (then (local.set $code (i32.const 100))))
            (global.set $g (i32.const 5))
            (if (call $open (i32.const 4) (i32.const 0) (i32.const 70000) (i32.const 5)
                  (i32.const 1) (i64.const 66) (i64.const 66) (i32.const 0) (i32.const 70200))
              (then (local.set $code (i32.add (local.get $code) (i32.const 50)))))
            (local.set $code (i32.add (local.get $code) (i32.load (i32.const 70200))))
            (call $down (i32.const 3) (local.get $code))))"#
    );
    exec()
        .load(&wasmer::wat2wasm(wat.as_bytes()).unwrap())
        .unwrap()
}

// Threat: T-LEAK-RUNS (docs/security.md)
#[test]
fn an_instance_kept_for_the_next_run_starts_it_as_a_new_one() {
    let program = kept_guest();
    let run = |args: &[&str]| {
        exec()
            .run(&program, RunSpec::new(vfs(), args.iter().copied()))
            .unwrap()
    };
    // The first run on this thread makes its instance; the next ones get it back with the
    // global at its first value and none of the last run's descriptors open.
    let first = run(&["k"]);
    assert_eq!(first.exit, Exit::Code(5));
    assert!(!first.kept_instance);
    for i in 0..5 {
        let r = run(&["k"]);
        assert_eq!(r.exit, Exit::Code(5), "run {i}");
        assert!(r.kept_instance, "run {i} made a new instance");
    }
    // A run that trapped leaves nothing to keep: the next one makes its instance.
    assert!(matches!(run(&["k", "trap"]).exit, Exit::Trap(_)));
    let after = run(&["k"]);
    assert_eq!(after.exit, Exit::Code(5));
    assert!(!after.kept_instance);
    // Instances are kept per thread: another thread makes its own.
    let program = program.clone();
    std::thread::spawn(move || {
        let r = exec().run(&program, RunSpec::new(vfs(), ["k"])).unwrap();
        assert_eq!(r.exit, Exit::Code(5));
        assert!(!r.kept_instance);
    })
    .join()
    .unwrap();
}
