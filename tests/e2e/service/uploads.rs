//! Uploads: every accepted format, and every refused one leaves the workspace untouched.

use std::io::Write;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::*;

/// A tar with one entry whose name and type are written raw, past the builder's checks.
fn raw_tar(name: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_old();
    {
        let bytes = h.as_old_mut();
        bytes.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            bytes.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
    }
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(kind);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out.extend_from_slice(&[0u8; 1024]);
    out
}

/// `first`'s entries followed by `second`'s (the end-of-archive blocks of `first` dropped).
fn then(mut first: Vec<u8>, second: Vec<u8>) -> Vec<u8> {
    first.truncate(first.len() - 1024);
    first.extend(second);
    first
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zip_of(entries: &[(&str, &[u8])], symlink: Option<(&str, &str)>) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (p, d) in entries {
        w.start_file(*p, opts).unwrap();
        w.write_all(d).unwrap();
    }
    if let Some((name, target)) = symlink {
        w.add_symlink(name, target, opts).unwrap();
    }
    w.finish().unwrap().into_inner()
}

async fn upload(srv: &TestServer, sid: &str, ct: &str, body: Vec<u8>) -> (StatusCode, Value) {
    upload_to(srv, &format!("/sessions/{sid}/files"), ct, body).await
}

async fn workspace(srv: &TestServer, sid: &str) -> String {
    let (_, frames, st) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "find . -type f | sort; find . -type l"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    stdout(&frames)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_tar_tgz_and_zip_uploads_land_in_the_workspace() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    let form = reqwest::multipart::Form::new()
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(b"one\n".to_vec()).file_name("one.txt"),
        )
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(b"two\n".to_vec()).file_name("dir/two.txt"),
        );
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["files"], 2);
    assert_eq!(v["bytes"], 8);

    let (s, v) = upload(
        &srv,
        &sid,
        "application/x-tar",
        tar_of(&[("t/a.txt", b"tar\n")]),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = upload(
        &srv,
        &sid,
        "application/gzip",
        gz(&tar_of(&[("g/b.txt", b"tgz\n")])),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["kind"], "tar.gz");
    let (s, v) = upload(
        &srv,
        &sid,
        "application/zip",
        zip_of(&[("z/c.txt", b"zip\n")], None),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        workspace(&srv, &sid).await,
        "./dir/two.txt\n./g/b.txt\n./one.txt\n./t/a.txt\n./z/c.txt\n"
    );
    let (_, frames, _) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["cat", "one.txt", "dir/two.txt", "t/a.txt", "g/b.txt", "z/c.txt"] }))
        .await;
    assert_eq!(stdout(&frames), "one\ntwo\ntar\ntgz\nzip\n");
}

// Threat: T-UPLOAD (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_upload_writes_nothing() {
    let srv = TestServer::with(|c| {
        c.max_upload_files = 5;
        c.max_upload_depth = 3;
        c.max_upload_mb = 2;
    })
    .await;
    let sid = srv.session(json!({})).await;
    let (s, _) = upload(&srv, &sid, "application/x-tar", tar_of(&[("marker", b"m")])).await;
    assert_eq!(s, StatusCode::CREATED);
    let before = workspace(&srv, &sid).await;
    assert_eq!(before, "./marker\n");

    let ok = ("ok.txt", b"fine".as_slice());
    let many: Vec<(String, Vec<u8>)> = (0..6).map(|i| (format!("f{i}"), vec![b'x'])).collect();
    let many_refs: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    let zeros = vec![0u8; 3 << 20];
    let cases: Vec<(&str, &str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "absolute",
            "application/x-tar",
            raw_tar("/etc/evil", tar::EntryType::Regular, None, b"x"),
            StatusCode::BAD_REQUEST,
            "absolute_path",
        ),
        (
            "dotdot",
            "application/x-tar",
            raw_tar("a/../../evil", tar::EntryType::Regular, None, b"x"),
            StatusCode::BAD_REQUEST,
            "path_traversal",
        ),
        (
            "symlink",
            "application/x-tar",
            then(
                tar_of(&[ok]),
                raw_tar("link", tar::EntryType::Symlink, Some("/etc/passwd"), b""),
            ),
            StatusCode::BAD_REQUEST,
            "symlink",
        ),
        (
            "hardlink",
            "application/x-tar",
            raw_tar("hard", tar::EntryType::Link, Some("marker"), b""),
            StatusCode::BAD_REQUEST,
            "hardlink",
        ),
        (
            "chardev",
            "application/x-tar",
            raw_tar("dev", tar::EntryType::Char, None, b""),
            StatusCode::BAD_REQUEST,
            "device",
        ),
        (
            "fifo",
            "application/x-tar",
            raw_tar("fifo", tar::EntryType::Fifo, None, b""),
            StatusCode::BAD_REQUEST,
            "device",
        ),
        (
            "deep",
            "application/x-tar",
            tar_of(&[ok, ("a/b/c/d", b"x")]),
            StatusCode::BAD_REQUEST,
            "too_deep",
        ),
        (
            "many",
            "application/x-tar",
            tar_of(&many_refs),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_files",
        ),
        (
            "big",
            "application/x-tar",
            tar_of(&[ok, ("big", &zeros)]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            "zip-symlink",
            "application/zip",
            zip_of(&[ok], Some(("ln", "/etc/passwd"))),
            StatusCode::BAD_REQUEST,
            "symlink",
        ),
        (
            "zip-dotdot",
            "application/zip",
            zip_of(&[ok, ("../up", b"x")], None),
            StatusCode::BAD_REQUEST,
            "path_traversal",
        ),
        (
            "zip-absolute",
            "application/zip",
            zip_of(&[("/abs", b"x")], None),
            StatusCode::BAD_REQUEST,
            "absolute_path",
        ),
        (
            "not-a-tar",
            "application/gzip",
            b"definitely not gzip".to_vec(),
            StatusCode::BAD_REQUEST,
            "malformed",
        ),
        (
            "not-a-zip",
            "application/zip",
            b"PK nope".to_vec(),
            StatusCode::BAD_REQUEST,
            "malformed",
        ),
    ];
    for (name, ct, body, status, reason) in cases {
        let (s, v) = upload(&srv, &sid, ct, body).await;
        assert_eq!(s, status, "{name}: {v}");
        assert_eq!(v["error"]["details"]["reason"], reason, "{name}: {v}");
        assert_eq!(
            workspace(&srv, &sid).await,
            before,
            "{name} wrote something"
        );
    }
    let (s, v) = upload(&srv, &sid, "text/plain", b"x".to_vec()).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{v}");
    let (s, _) = upload(&srv, "no-such-session", "application/x-tar", tar_of(&[ok])).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

// Threat: T-UPLOAD (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decompression_bombs_are_stopped_while_streaming() {
    let srv = TestServer::with(|c| c.max_upload_ratio = 20).await;
    let sid = srv.session(json!({})).await;
    // 40 MB of zeros compresses to about 40 KB: far past a 20x ratio, within the 64 MB cap.
    let zeros = vec![0u8; 40 << 20];
    let (s, v) = upload(
        &srv,
        &sid,
        "application/gzip",
        gz(&tar_of(&[("z", &zeros)])),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "compression_ratio");
    let (s, v) = upload(
        &srv,
        &sid,
        "application/zip",
        zip_of(&[("z", &zeros)], None),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "compression_ratio");
    assert_eq!(workspace(&srv, &sid).await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_past_the_workspace_cap_is_rolled_back() {
    let srv = TestServer::with(|c| c.workspace_cap_mb = 1).await;
    let sid = srv.session(json!({})).await;
    let half = vec![b'x'; 600 * 1024];
    let (s, v) = upload(
        &srv,
        &sid,
        "application/x-tar",
        tar_of(&[("a", &half), ("b", &half)]),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded");
    assert_eq!(workspace(&srv, &sid).await, "");
    let (s, _) = upload(&srv, &sid, "application/x-tar", tar_of(&[("a", &half)])).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(workspace(&srv, &sid).await, "./a\n");
}

async fn upload_to(
    srv: &TestServer,
    path_and_query: &str,
    ct: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let resp = srv
        .client
        .post(srv.url(path_and_query))
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    let s = resp.status();
    (s, resp.json().await.unwrap())
}

// Threat: T-UPLOAD (docs/security.md)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_of_millions_of_directory_headers_is_refused_while_streaming() {
    let srv = TestServer::start().await;
    let sid = srv.session(json!({})).await;
    // Two million headers of one directory: a gigabyte of tar in about a megabyte of gzip.
    // Directories count as entries, so the default cap stops it after the first thousand.
    let mut h = tar::Header::new_gnu();
    h.set_size(0);
    h.set_mode(0o755);
    h.set_entry_type(tar::EntryType::Directory);
    h.set_path("d/").unwrap();
    h.set_cksum();
    let block: Vec<u8> = h.as_bytes().repeat(2048);
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    for _ in 0..1000 {
        e.write_all(&block).unwrap();
    }
    let body = e.finish().unwrap();
    assert!(body.len() < 8 << 20, "{}", body.len());
    let (s, v) = upload(&srv, &sid, "application/gzip", body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "too_many_files", "{v}");
    // Nothing was made, and the session takes the next upload.
    let (_, frames, st) = srv
        .run(json!({ "spec_version": "1.0", "session_id": sid, "command": ["bash", "-c", "find . | sort"] }))
        .await;
    assert_eq!(st["phase"], "completed", "{st}");
    assert_eq!(stdout(&frames), ".\n");
    let (s, v) = upload(
        &srv,
        &sid,
        "application/x-tar",
        tar_of(&[("ok.txt", b"ok\n")]),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_leave_out_vcs_caches_and_binaries_unless_asked() {
    let srv = TestServer::start().await;
    let members: &[(&str, &[u8])] = &[
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".git/objects/ab/cdef", b"blob"),
        ("src/main.py", b"print('hi')\n"),
        ("src/__pycache__/main.cpython-311.pyc", b"\x00pyc"),
        ("node_modules/left/index.js", b"module.exports = 1;\n"),
        ("img/chart.png", b"\x89PNG\r\n"),
        ("build/out.txt", b"built\n"),
        ("notes.log", b"log\n"),
    ];
    let archive = tar_of(members);

    // The defaults: version control, caches, binaries by extension.
    let sid = srv.session(json!({})).await;
    let (s, v) = upload_to(
        &srv,
        &format!("/sessions/{sid}/files"),
        "application/x-tar",
        archive.clone(),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["file_count"], 3, "{v}");
    assert_eq!(v["excluded_count"], 5, "{v}");
    let mut excluded: Vec<&str> = v["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    excluded.sort();
    assert_eq!(
        excluded,
        [
            ".git/HEAD",
            ".git/objects/ab/cdef",
            "img/chart.png",
            "node_modules/left/index.js",
            "src/__pycache__/main.cpython-311.pyc"
        ]
    );
    assert_eq!(
        workspace(&srv, &sid).await,
        "./build/out.txt\n./notes.log\n./src/main.py\n"
    );

    // The request's own rules come after the defaults: one more left out, one kept.
    let sid = srv.session(json!({})).await;
    let (s, v) = upload_to(
        &srv,
        &format!("/sessions/{sid}/files?exclude=build/&exclude=*.log&exclude=%21*.png"),
        "application/gzip",
        gz(&archive),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        workspace(&srv, &sid).await,
        "./img/chart.png\n./src/main.py\n"
    );

    // Without the defaults everything lands; a zip and multipart parts are filtered alike.
    let sid = srv.session(json!({})).await;
    let (s, v) = upload_to(
        &srv,
        &format!("/sessions/{sid}/files?default_excludes=false"),
        "application/zip",
        zip_of(members, None),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["file_count"], 8, "{v}");
    assert_eq!(v["excluded_count"], 0, "{v}");
    let sid = srv.session(json!({})).await;
    let form = reqwest::multipart::Form::new()
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(b"\x89PNG".to_vec()).file_name("a.png"),
        )
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(b"x\n".to_vec()).file_name("a.txt"),
        );
    let resp = srv
        .client
        .post(srv.url(&format!("/sessions/{sid}/files")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        (v["file_count"].clone(), v["excluded"].clone()),
        (json!(1), json!(["a.png"])),
        "{v}"
    );

    // A rule that does not parse is a 400 that writes nothing.
    let (s, v) = upload_to(
        &srv,
        &format!("/sessions/{sid}/files?exclude=x%5Bz-a%5D"),
        "application/x-tar",
        archive.clone(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["details"]["reason"], "invalid_exclude", "{v}");
    let (s, v) = upload_to(
        &srv,
        &format!("/sessions/{sid}/files?default_excludes=maybe"),
        "application/x-tar",
        archive,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(workspace(&srv, &sid).await, "./a.txt\n");
}
