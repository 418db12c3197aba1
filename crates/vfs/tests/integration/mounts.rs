//! Host folders mounted into a tree: what is visible, what is read, and that the host is
//! never written.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use wasmsand_vfs::{Entry, Errno, MountOptions, Vfs, VfsOptions};

fn errno<T: std::fmt::Debug>(r: Result<T, wasmsand_vfs::VfsError>) -> Errno {
    r.expect_err("should fail").errno
}

/// Every file below `root` with its bytes (symlinks as their target): to see the host did not
/// change.
fn host_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                out.insert(
                    rel,
                    fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else if ft.is_dir() {
                out.insert(rel + "/", Vec::new());
                stack.push(p);
            } else if ft.is_file() {
                out.insert(rel, fs::read(&p).unwrap());
            } else {
                out.insert(rel, b"special".to_vec());
            }
        }
    }
    out
}

/// A repository-like folder with secrets, ignored files, links in and out, and a FIFO.
fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let w = |p: &str, data: &str| {
        let p = r.join(p);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    };
    w("src/main.rs", "fn main() {}\n");
    w("src/lib/util.rs", "pub fn f() {}\n");
    w("README.md", "# demo\n");
    w(".env", "TOKEN=secret\n");
    w(".env.local", "TOKEN=secret2\n");
    w("config/server.pem", "-----BEGIN-----\n");
    w("keys/id_ed25519", "private\n");
    w(".ssh/config", "Host x\n");
    w(".aws/credentials", "[default]\n");
    w(".netrc", "machine x login y password z\n");
    w(".gitignore", "target/\n*.log\n!keep.log\n");
    w("target/debug/app", "binary\n");
    w("build.log", "noise\n");
    w("keep.log", "kept\n");
    w("sub/.gitignore", "generated.rs\n");
    w("sub/generated.rs", "// generated\n");
    w("sub/real.rs", "// real\n");
    w(".git/HEAD", "ref: refs/heads/main\n");
    w(
        ".git/config",
        "[remote \"origin\"]\n\turl = https://bob:ghp_token@example.com/o/r.git\n[credential]\n\thelper = store\n",
    );
    symlink("src/main.rs", r.join("inside-rel")).unwrap();
    symlink(r.join("README.md"), r.join("inside-abs")).unwrap();
    symlink("/etc/passwd", r.join("escape-abs")).unwrap();
    symlink("../../outside", r.join("src/escape-rel")).unwrap();
    let fifo = r.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    t
}

fn names(v: &Vfs, path: &str) -> Vec<String> {
    v.readdir(path)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

// Threat: T-HOST-MOUNT (docs/security.md)
#[test]
fn secrets_special_files_and_escaping_links_are_invisible() {
    let host = repo();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    v.mount_host("/work/repo", host.path(), &MountOptions::default())
        .unwrap();
    let top = names(&v, "/work/repo");
    for hidden in [
        ".env",
        ".env.local",
        ".ssh",
        ".aws",
        ".netrc",
        "pipe",
        "escape-abs",
    ] {
        assert!(!top.contains(&hidden.to_string()), "{hidden} in {top:?}");
        assert_eq!(
            errno(v.read(&format!("/work/repo/{hidden}"))),
            Errno::ENOENT
        );
    }
    for shown in [
        "README.md",
        "src",
        "target",
        "build.log",
        ".gitignore",
        ".git",
        "inside-rel",
        "inside-abs",
    ] {
        assert!(top.contains(&shown.to_string()), "{shown} not in {top:?}");
    }
    assert!(names(&v, "/work/repo/config").is_empty());
    assert!(names(&v, "/work/repo/keys").is_empty());
    assert!(!names(&v, "/work/repo/src").contains(&"escape-rel".to_string()));
    // Links inside the root work, an absolute one moved to the mount point.
    assert_eq!(
        &v.read("/work/repo/inside-rel").unwrap()[..],
        b"fn main() {}\n"
    );
    assert_eq!(
        v.readlink("/work/repo/inside-abs").unwrap(),
        "/work/repo/README.md"
    );
    assert_eq!(&v.read("/work/repo/inside-abs").unwrap()[..], b"# demo\n");
    // The repository's config keeps its remote, not its credentials.
    let cfg = String::from_utf8(v.read("/work/repo/.git/config").unwrap().to_vec()).unwrap();
    assert!(cfg.contains("url = https://example.com/o/r.git"), "{cfg}");
    assert!(
        !cfg.contains("ghp_token") && !cfg.contains("helper"),
        "{cfg}"
    );
    assert_eq!(
        v.stat("/work/repo/.git/config").unwrap().size,
        cfg.len() as u64
    );
}

#[test]
fn secrets_are_shown_only_when_named_and_gitignore_only_when_asked() {
    let host = repo();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    let opts = MountOptions {
        gitignore: true,
        allow_secrets: vec![".env*".into(), ".git/config".into()],
        exclude: vec!["docs/".into(), "README.md".into()],
        ..MountOptions::default()
    };
    v.mount_host("/r", host.path(), &opts).unwrap();
    let top = names(&v, "/r");
    assert!(top.contains(&".env".to_string()) && top.contains(&".env.local".to_string()));
    assert!(
        !top.contains(&".netrc".to_string()),
        "only the named pattern is allowed"
    );
    for ignored in ["target", "build.log", "README.md"] {
        assert!(!top.contains(&ignored.to_string()), "{ignored} in {top:?}");
    }
    assert!(
        top.contains(&"keep.log".to_string()),
        "a `!` rule re-includes"
    );
    assert_eq!(names(&v, "/r/sub"), [".gitignore", "real.rs"]);
    let cfg = v.read("/r/.git/config").unwrap();
    assert!(String::from_utf8_lossy(&cfg).contains("ghp_token"));

    let bad = MountOptions {
        allow_secrets: vec!["*.key".into()],
        ..MountOptions::default()
    };
    let e = v.mount_host("/r2", host.path(), &bad).unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    assert!(e.message.contains(".env*"), "{e}");
}

// Threat: T-HOST-MOUNT (docs/security.md)
#[test]
fn the_host_is_never_written_and_the_sandbox_keeps_its_changes() {
    let host = repo();
    let before = host_tree(host.path());
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    v.mount_host("/home/user/repo", host.path(), &MountOptions::default())
        .unwrap();
    let r = "/home/user/repo";
    v.write(&format!("{r}/src/main.rs"), "changed\n").unwrap();
    v.append(&format!("{r}/README.md"), "more\n").unwrap();
    v.write_at(&format!("{r}/keep.log"), 0, b"K").unwrap();
    v.remove_recursive(&format!("{r}/target")).unwrap();
    v.rename(&format!("{r}/src/lib"), &format!("{r}/lib2"))
        .unwrap();
    v.mkdir_p(&format!("{r}/new/deep")).unwrap();
    v.write(&format!("{r}/new/deep/file"), "x").unwrap();
    v.chmod(&format!("{r}/build.log"), 0o600).unwrap();
    v.symlink("README.md", &format!("{r}/link")).unwrap();
    v.truncate(&format!("{r}/sub/real.rs"), 2).unwrap();
    assert_eq!(
        &v.read(&format!("{r}/README.md")).unwrap()[..],
        b"# demo\nmore\n"
    );
    assert_eq!(&v.read(&format!("{r}/keep.log")).unwrap()[..], b"Kept\n");
    assert_eq!(
        &v.read(&format!("{r}/lib2/util.rs")).unwrap()[..],
        b"pub fn f() {}\n"
    );
    assert_eq!(host_tree(host.path()), before, "the host folder changed");

    // What the sandbox added counts; what the host brought does not.
    let u = v.usage();
    assert_eq!(u.files_used, 4, "new, new/deep, new/deep/file, link: {u:?}");
    assert_eq!(
        u.bytes_used,
        ("# demo\nmore\n".len() + "changed\n".len() + "Kept\n".len() + 1 + 2) as u64,
        "{u:?}"
    );
    v.remove_recursive(r).unwrap();
    let u = v.usage();
    assert_eq!((u.files_used, u.bytes_used), (0, 0), "{u:?}");
    assert_eq!(host_tree(host.path()), before);
}

#[test]
fn nothing_is_listed_or_read_until_looked_at() {
    let host = tempfile::tempdir().unwrap();
    for d in 0..50 {
        let dir = host.path().join(format!("d{d}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..20 {
            fs::write(dir.join(format!("f{f}")), vec![b'x'; 100]).unwrap();
        }
    }
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    let info = v
        .mount_host("/m", host.path(), &MountOptions::default())
        .unwrap();
    assert_eq!((info.dirs_listed, info.files_read), (0, 0));
    assert!(v.stat("/m").unwrap().is_dir());
    assert_eq!(v.mounts()[0].dirs_listed, 0, "stat lists nothing");
    assert_eq!(v.stat("/m/d7/f3").unwrap().size, 100);
    let m = &v.mounts()[0];
    assert_eq!((m.dirs_listed, m.files_read, m.host_bytes_read), (2, 0, 0));
    v.read("/m/d7/f3").unwrap();
    v.read("/m/d7/f3").unwrap();
    let m = &v.mounts()[0];
    assert_eq!(
        (m.files_read, m.host_bytes_read),
        (1, 100),
        "read once, kept"
    );
    // A fork and a snapshot share what was listed and read, and cost nothing more.
    let mut fork = v.cow_clone();
    let snap = fork.snapshot();
    fork.write("/m/d7/f3", "mine").unwrap();
    assert_eq!(v.read("/m/d7/f3").unwrap().len(), 100);
    fork.restore(snap).unwrap();
    assert_eq!(fork.read("/m/d7/f3").unwrap().len(), 100);
    assert_eq!(v.mounts()[0].files_read, 1);
    assert_eq!(v.mounts()[0].dirs_listed, 2);
}

#[test]
fn the_host_read_cap_is_a_clear_error() {
    let host = tempfile::tempdir().unwrap();
    fs::write(host.path().join("a"), vec![b'a'; 600]).unwrap();
    fs::write(host.path().join("b"), vec![b'b'; 600]).unwrap();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    let opts = MountOptions {
        max_host_bytes: Some(1000),
        ..MountOptions::default()
    };
    v.mount_host("/m", host.path(), &opts).unwrap();
    v.read("/m/a").unwrap();
    let e = v.read("/m/b").unwrap_err();
    assert_eq!(e.errno, Errno::EIO);
    assert!(e.message.contains("host read limit"), "{e}");
    // Writing starts from the bytes, so it fails the same way and changes nothing.
    assert_eq!(errno(v.append("/m/b", "x")), Errno::EIO);
    assert_eq!(
        v.read("/m/a").unwrap().len(),
        600,
        "what was read stays readable"
    );
    // Replacing the file whole needs nothing from the host.
    v.write("/m/b", "new").unwrap();
    assert_eq!(&v.read("/m/b").unwrap()[..], b"new");
}

#[test]
fn a_read_only_mount_refuses_every_change() {
    let host = repo();
    let before = host_tree(host.path());
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    let opts = MountOptions {
        read_only: true,
        ..MountOptions::default()
    };
    v.mount_host("/ro", host.path(), &opts).unwrap();
    assert_eq!(errno(v.write("/ro/README.md", "x")), Errno::EROFS);
    assert_eq!(errno(v.write("/ro/src/new.rs", "x")), Errno::EROFS);
    assert_eq!(errno(v.mkdir("/ro/src/d")), Errno::EROFS);
    assert_eq!(errno(v.remove_recursive("/ro/src")), Errno::EROFS);
    assert_eq!(errno(v.remove_recursive("/ro")), Errno::EROFS);
    assert_eq!(errno(v.chmod("/ro/README.md", 0o777)), Errno::EROFS);
    assert_eq!(errno(v.rename("/ro/README.md", "/tmp/x")), Errno::EROFS);
    assert_eq!(
        errno(v.link("/ro/README.md", "/tmp/x", false)),
        Errno::EXDEV
    );
    assert_eq!(&v.read("/ro/README.md").unwrap()[..], b"# demo\n");
    assert_eq!(v.usage().files_used, 0);
    assert_eq!(host_tree(host.path()), before);
}

#[test]
fn mount_changes_list_what_the_sandbox_did() {
    let host = repo();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    v.mount_host("/r", host.path(), &MountOptions::default())
        .unwrap();
    assert!(v.mount_changes("/r").unwrap().is_empty());
    v.write("/r/src/main.rs", "fn main() { changed() }\n")
        .unwrap();
    v.write("/r/src/added.rs", "new\n").unwrap();
    v.unlink("/r/build.log").unwrap();
    v.chmod("/r/keep.log", 0o755).unwrap();
    // Written again with the same bytes: not a change.
    v.write("/r/sub/real.rs", "// real\n").unwrap();
    v.remove_recursive("/r/src/lib").unwrap();
    let got = v.mount_changes("/r").unwrap();
    let brief: Vec<(&str, Option<&str>, Option<&str>)> = got
        .iter()
        .map(|c| {
            (
                c.path.as_str(),
                c.old.as_ref().map(Entry::kind),
                c.new.as_ref().map(Entry::kind),
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            ("/r/build.log", Some("file"), None),
            ("/r/keep.log", Some("file"), Some("file")),
            ("/r/src/added.rs", None, Some("file")),
            ("/r/src/lib", Some("dir"), None),
            ("/r/src/lib/util.rs", Some("file"), None),
            ("/r/src/main.rs", Some("file"), Some("file")),
        ]
    );
    let main = &got[5];
    assert_eq!(
        main.old,
        Some(Entry::File {
            mode: 0o644,
            data: "fn main() {}\n".into()
        })
    );
    assert_eq!(got[1].new.as_ref().unwrap().mode(), 0o755);
    assert_eq!(errno(v.mount_changes("/nowhere")), Errno::EINVAL);
    // Against a snapshot: only what came after it.
    let snap = v.snapshot();
    v.write("/r/README.md", "# changed\n").unwrap();
    let since = v.changes_since(&v.snapshot_checkpoint(snap).unwrap(), "/r");
    assert_eq!(since.len(), 1);
    assert_eq!(since[0].path, "/r/README.md");
}

// Threat: T-HOST-MOUNT (docs/security.md)
#[test]
fn a_folder_swapped_for_a_link_after_listing_is_not_followed() {
    let host = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "outside\n").unwrap();
    fs::create_dir(host.path().join("d")).unwrap();
    fs::write(host.path().join("d/secret"), "inside\n").unwrap();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    v.mount_host("/m", host.path(), &MountOptions::default())
        .unwrap();
    assert_eq!(names(&v, "/m/d"), ["secret"]);
    fs::remove_dir_all(host.path().join("d")).unwrap();
    symlink(outside.path(), host.path().join("d")).unwrap();
    let e = v.read("/m/d/secret").unwrap_err();
    assert_eq!(e.errno, Errno::EIO, "{e}");
    assert!(e.message.contains("outside the mounted folder"), "{e}");
}

#[test]
fn bad_mounts_are_clear_errors() {
    let host = repo();
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    assert_eq!(
        errno(v.mount_host("/x", Path::new("/no/such/dir"), &MountOptions::default())),
        Errno::ENOENT
    );
    assert_eq!(
        errno(v.mount_host(
            "/x",
            &host.path().join("README.md"),
            &MountOptions::default()
        )),
        Errno::ENOTDIR
    );
    assert_eq!(
        errno(v.mount_host("/", host.path(), &MountOptions::default())),
        Errno::EINVAL
    );
    assert_eq!(
        errno(v.mount_host("/dev", host.path(), &MountOptions::default())),
        Errno::ENOTEMPTY
    );
    v.write("/tmp/f", "x").unwrap();
    assert_eq!(
        errno(v.mount_host("/tmp/f", host.path(), &MountOptions::default())),
        Errno::EEXIST
    );
    let bad = MountOptions {
        exclude: vec!["{unclosed".into()],
        ..MountOptions::default()
    };
    assert_eq!(errno(v.mount_host("/y", host.path(), &bad)), Errno::EINVAL);
    assert!(v.mounts().is_empty());
}

#[test]
fn ignore_files_that_are_links_or_fifos_are_not_read() {
    let host = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("patterns"), "*.txt\n").unwrap();
    fs::create_dir(host.path().join("a")).unwrap();
    fs::write(host.path().join("a/keep.txt"), "x").unwrap();
    symlink(
        outside.path().join("patterns"),
        host.path().join("a/.gitignore"),
    )
    .unwrap();
    fs::create_dir(host.path().join("b")).unwrap();
    fs::write(host.path().join("b/keep.txt"), "y").unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(host.path().join("b/.gitignore"))
            .status()
            .unwrap()
            .success()
    );
    let mut v = Vfs::with_standard_layout(VfsOptions::default());
    let opts = MountOptions {
        gitignore: true,
        ..MountOptions::default()
    };
    v.mount_host("/m", host.path(), &opts).unwrap();
    // The link's target is outside the folder: neither followed nor listed.
    assert_eq!(names(&v, "/m/a"), ["keep.txt"]);
    // A FIFO would hang a reader: not read, not listed.
    assert_eq!(names(&v, "/m/b"), ["keep.txt"]);
}
