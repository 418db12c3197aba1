//! Portable state (docs/runs.md). A sandbox exported as a blob and imported again (here, in
//! the same process; the blob carries nothing process-specific) holds the same files, modes,
//! times, shell state and limits; bad blobs are refused with a clear reason.

use wasmsand::{ImportOptions, Limits, Sandbox, SandboxOptions};

fn busy_sandbox() -> Sandbox {
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 777,
            timeout_ms: 12_345,
            ..Limits::default()
        },
        ..Default::default()
    });
    let r = sb
        .run(
            "mkdir -p proj/src && printf 'a\\nb\\n' > proj/src/x.txt && chmod 640 proj/src/x.txt \
             && touch -d '2001-02-03 04:05:06' proj/src/x.txt && ln -s src/x.txt proj/link \
             && head -c 3000 /dev/urandom > /tmp/bin && rm -f /etc/nothing; \
             export GREETING='hi there' ; declare -a arr=(1 two 'three 3'); declare -A m=([k]=v [x]=y); \
             declare -ri CONST=7; f() { local a=$1; echo \"f:$a\"; }; alias ll='ls -l'; \
             set -o pipefail; shopt -s nullglob; trap 'echo bye' EXIT; umask 027; cd proj",
        )
        .unwrap();
    assert_eq!(r.exit_code, 0, "{r:?}");
    sb
}

const PROBE: &str = "pwd; cat src/x.txt; stat -c '%a %Y' src/x.txt; readlink link; \
    wc -c < /tmp/bin; echo \"$GREETING\"; echo \"${arr[2]} ${#arr[@]} ${m[k]}\"; declare -p CONST; \
    f 1; alias ll; set -o | grep pipefail; shopt nullglob; umask; trap -p EXIT";

#[test]
fn a_sandbox_round_trips_through_a_blob() {
    let sb = busy_sandbox();
    let blob = sb.export_state(None).unwrap();
    let copy = Sandbox::import_state(&blob, ImportOptions::default()).unwrap();
    let want = sb.run(PROBE).unwrap();
    let got = copy.run(PROBE).unwrap();
    assert_eq!(want.exit_code, 0, "{want:?}");
    assert_eq!(got.stdout, want.stdout);
    assert!(got.stdout.contains("640 981173106"), "{}", got.stdout);
    assert_eq!(
        copy.read_file("/tmp/bin").unwrap(),
        sb.read_file("/tmp/bin").unwrap()
    );
    assert_eq!(copy.limits(), sb.limits());
    assert_eq!(copy.limits().file_count, 777);
    assert_eq!(copy.usage().unwrap(), sb.usage().unwrap());
    // The copy is independent.
    copy.run("echo changed > src/x.txt").unwrap();
    assert_eq!(sb.read_file("/home/user/proj/src/x.txt").unwrap(), "a\nb\n");
}

#[test]
fn removed_and_replaced_layout_entries_round_trip() {
    let sb = Sandbox::new(SandboxOptions::default());
    sb.run("rmdir /tmp && true; rm -rf /tmp/* ; mkdir /tmp/d; rmdir /tmp/d; chmod 700 /home/user")
        .unwrap();
    sb.write_file("/tmp/f", b"x").unwrap();
    sb.remove("/tmp/f", false).unwrap();
    let copy =
        Sandbox::import_state(&sb.export_state(None).unwrap(), ImportOptions::default()).unwrap();
    let probe = "ls -la /tmp | wc -l; stat -c %a /home/user";
    assert_eq!(
        copy.run(probe).unwrap().stdout,
        sb.run(probe).unwrap().stdout
    );
}

// Threat: T-STATE-BLOB (docs/security.md)
#[test]
fn a_keyed_blob_needs_its_key() {
    let sb = busy_sandbox();
    let blob = sb.export_state(Some(b"secret")).unwrap();
    let open = |key: Option<&[u8]>| {
        Sandbox::import_state(
            &blob,
            ImportOptions {
                key: key.map(<[u8]>::to_vec),
                ..Default::default()
            },
        )
    };
    assert!(open(Some(b"secret")).is_ok());
    let e = open(Some(b"wrong")).err().unwrap().to_string();
    assert!(e.contains("authentication failed"), "{e}");
    let e = open(None).err().unwrap().to_string();
    assert!(e.contains("give the key"), "{e}");
    // An unkeyed blob is not taken when a key is expected.
    let plain = sb.export_state(None).unwrap();
    let e = Sandbox::import_state(
        &plain,
        ImportOptions {
            key: Some(b"secret".to_vec()),
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("no key authentication"), "{e}");
}

fn import_err(blob: &[u8], opts: ImportOptions) -> String {
    match Sandbox::import_state(blob, opts) {
        Ok(_) => panic!("imported a bad blob"),
        Err(e) => e.to_string(),
    }
}

// Threat: T-STATE-BLOB (docs/security.md)
#[test]
fn bad_blobs_are_refused_with_their_reason() {
    let sb = busy_sandbox();
    let blob = sb.export_state(None).unwrap();
    let keyed = sb.export_state(Some(b"k")).unwrap();
    let d = ImportOptions::default;

    assert!(
        import_err(b"hello world, not a blob at all", d()).contains("not a wasmsand state blob")
    );
    assert!(import_err(&blob[..5], d()).contains("truncated"));
    assert!(import_err(&blob[..15], d()).contains("truncated"));
    assert!(import_err(&blob[..blob.len() - 1], d()).contains("checksum mismatch"));
    let mut flipped = blob.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    assert!(import_err(&flipped, d()).contains("checksum mismatch"));
    // A forged keyed blob: content changed, tag recomputed without the key.
    let mut forged = keyed.clone();
    forged[mid] ^= 1;
    let e = import_err(
        &forged,
        ImportOptions {
            key: Some(b"k".to_vec()),
            ..d()
        },
    );
    assert!(e.contains("authentication failed"), "{e}");
    let mut newer = blob.clone();
    newer[8] = 9;
    let e = import_err(&newer, d());
    assert!(e.contains("newer wasmsand (format version 9"), "{e}");
    let e = import_err(
        &blob,
        ImportOptions {
            max_bytes: Some(100),
            ..d()
        },
    );
    assert!(e.contains("too large"), "{e}");
    // Every refusal left nothing behind: the source still works and imports cleanly.
    assert!(Sandbox::import_state(&blob, d()).is_ok());
}

// Threat: T-STATE-BLOB (docs/security.md)
#[test]
fn state_that_does_not_fit_its_limits_is_refused() {
    // Files given at creation are part of the layout and do not count against the file
    // count; in a blob they are files like any other, and three do not fit in two.
    let sb = Sandbox::new(SandboxOptions {
        limits: Limits {
            file_count: 2,
            ..Limits::default()
        },
        files: vec![
            ("a".into(), bytes::Bytes::from_static(b"1")),
            ("b".into(), bytes::Bytes::from_static(b"2")),
            ("c".into(), bytes::Bytes::from_static(b"3")),
        ],
        ..Default::default()
    });
    let e = import_err(&sb.export_state(None).unwrap(), ImportOptions::default());
    assert!(e.contains("do not fit its limits"), "{e}");
}

#[test]
fn a_bare_payload_round_trips_into_a_sandbox_made_with_new_options() {
    let sb = busy_sandbox();
    let payload = sb.export_payload().unwrap();
    assert_eq!(
        payload,
        sb.export_payload().unwrap(),
        "equal states give equal bytes"
    );
    let opts = SandboxOptions {
        limits: Limits {
            file_count: 5000,
            ..Limits::default()
        },
        env: vec![("IGNORED".into(), "yes".into())],
        ..Default::default()
    };
    let copy = Sandbox::from_payload(&payload, opts).unwrap();
    let want = sb.run(PROBE).unwrap();
    assert_eq!(copy.run(PROBE).unwrap().stdout, want.stdout);
    assert_eq!(copy.limits().file_count, 5000, "the caller's limits hold");
    assert_eq!(copy.run("echo \"[$IGNORED]\"").unwrap().stdout, "[]\n");
    // Files that do not fit the new limits are refused, not half restored.
    let tight = SandboxOptions {
        limits: Limits {
            fs_bytes: 1000,
            ..Limits::default()
        },
        ..Default::default()
    };
    let e = Sandbox::from_payload(&payload, tight)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("do not fit"), "{e}");
    for bad in [
        &payload[..payload.len() - 3],
        &b"WSNDPAYL\x09\x00"[..],
        b"junk",
    ] {
        let e = Sandbox::from_payload(bad, SandboxOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("state blob: ") || e.contains("state blob: "),
            "{e}"
        );
    }
}
