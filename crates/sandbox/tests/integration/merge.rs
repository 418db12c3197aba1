//! Merging a fork back into its parent (`Sandbox::merge`, docs/runs.md) through real runs —
//! files, directories, modes, symlinks and deleted trees, conflicts that apply nothing, the
//! parent's limits, env and cwd, repeated merges, and what is not a fork of the target.

use wasmsand::{
    Errno, Limits, MergeOptions, RunOptions, Sandbox, SandboxError, SandboxOptions, SideChange,
};

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxOptions::default())
}

fn run(sb: &Sandbox, cmd: &str) -> String {
    let r = sb.run(cmd).unwrap();
    assert_eq!(r.exit_code, 0, "{cmd}: {}", r.stderr);
    r.stdout
}

fn applied(r: &wasmsand::MergeResult) -> Vec<(&str, SideChange)> {
    r.applied
        .iter()
        .map(|a| (a.path.as_str(), a.change))
        .collect()
}

#[test]
fn a_forks_files_dirs_modes_links_and_deleted_trees_come_back() {
    let parent = sandbox();
    run(
        &parent,
        "mkdir -p p/old/deep && echo 1 > p/a && echo x > p/old/deep/f && ln -s a p/l && echo k > p/keep",
    );
    let fork = parent.fork().unwrap();
    run(
        &fork,
        "cd p && echo 2 > a && chmod 700 keep && rm -r old && ln -sfn keep l && mkdir -p n/m && echo y > n/m/g",
    );
    run(&parent, "echo mine > side");
    let r = parent.merge(&fork, MergeOptions::default()).unwrap();
    assert_eq!(
        applied(&r),
        [
            ("/home/user/p/a", SideChange::Changed),
            ("/home/user/p/keep", SideChange::Changed),
            ("/home/user/p/l", SideChange::Changed),
            ("/home/user/p/n", SideChange::Added),
            ("/home/user/p/old", SideChange::Deleted),
        ]
    );
    assert_eq!(
        run(
            &parent,
            "cat p/a p/l p/n/m/g side; stat -c %a p/keep; readlink p/l; ls p; pwd"
        ),
        "2\nk\ny\nmine\n700\nkeep\na\nkeep\nl\nn\n/home/user\n"
    );
    // Inode numbers stay unique across what came from the fork and what was here.
    let inos = run(&parent, "stat -c %i ~/* p/* p/n/* p/n/m/* | sort | uniq -d");
    assert_eq!(inos, "");
    // The fork is as it was.
    assert_eq!(
        run(&fork, "pwd; cat ~/side 2>/dev/null; echo $?"),
        "/home/user/p\n1\n"
    );
}

#[test]
fn a_conflict_applies_nothing_and_names_both_sides() {
    let parent = sandbox();
    run(
        &parent,
        "mkdir d && echo 1 > d/f && echo 1 > g && echo 1 > h",
    );
    let fork = parent.fork().unwrap();
    run(
        &fork,
        "rm -r d; echo fork > g; rm h; echo new > n; echo same > s",
    );
    run(
        &parent,
        "echo inside > d/added; echo parent > g; echo 2 > h; echo same > s",
    );
    let before = run(&parent, "ls -R; cat g h s");
    let e = parent.merge(&fork, MergeOptions::default()).unwrap_err();
    let SandboxError::MergeConflict(c) = &e else {
        panic!("expected a conflict, got {e}");
    };
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.path.as_str(), c.ours, c.theirs))
        .collect();
    assert_eq!(
        got,
        [
            ("/home/user/d", SideChange::Changed, SideChange::Deleted),
            ("/home/user/g", SideChange::Changed, SideChange::Changed),
            ("/home/user/h", SideChange::Changed, SideChange::Deleted),
        ]
    );
    assert!(e.to_string().contains("/home/user/d"), "{e}");
    assert_eq!(run(&parent, "ls -R; cat g h s"), before);
    // The same file added on both sides with the same content is no conflict.
    run(&parent, "rm -r d; rm h; echo fork > g");
    let r = parent.merge(&fork, MergeOptions::default()).unwrap();
    assert_eq!(applied(&r), [("/home/user/n", SideChange::Added)]);
}

#[test]
fn a_merge_past_the_parents_limits_changes_nothing() {
    let limits = Limits {
        file_count: 3,
        ..Limits::default()
    };
    let parent = Sandbox::new(SandboxOptions {
        limits,
        ..Default::default()
    });
    let fork = parent.fork().unwrap();
    run(&fork, "touch a b");
    run(&parent, "touch c d");
    let e = parent.merge(&fork, MergeOptions::default()).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::ENOSPC), "{e}");
    assert_eq!(run(&parent, "ls"), "c\nd\n");
    run(&parent, "rm d");
    parent.merge(&fork, MergeOptions::default()).unwrap();
    assert_eq!(run(&parent, "ls"), "a\nb\nc\n");
}

#[test]
fn env_and_cwd_come_along_when_asked() {
    let parent = sandbox();
    run(&parent, "export A=1 B=2; readonly R=r; export R; mkdir w");
    let fork = parent.fork().unwrap();
    // `readonly` in the fork cannot change R; unset B; a new exported C; a plain variable.
    run(&fork, "export A=10 C=3; unset B; PLAIN=p; cd w");
    let r = parent
        .merge(
            &fork,
            MergeOptions {
                env: false,
                cwd: false,
            },
        )
        .unwrap();
    assert_eq!((r.env.len(), r.cwd.as_deref()), (0, None));
    assert_eq!(
        run(&parent, "echo $A ${B-unset} ${C-unset}; pwd"),
        "1 2 unset\n/home/user\n"
    );
    let r = parent
        .merge(
            &fork,
            MergeOptions {
                env: true,
                cwd: true,
            },
        )
        .unwrap();
    assert_eq!(r.env, ["A", "B", "C"]);
    assert_eq!(r.cwd.as_deref(), Some("/home/user/w"));
    assert_eq!(
        run(
            &parent,
            "echo $A ${B-unset} $C ${PLAIN-unset} $R; pwd; echo $PWD"
        ),
        "10 unset 3 unset r\n/home/user/w\n/home/user/w\n"
    );
    // A working directory the merged files do not have: refused, nothing changed.
    let fork = parent.fork().unwrap();
    run(
        &fork,
        "echo f > /tmp/x; mkdir /tmp/t; cd /tmp/t; rmdir /tmp/t",
    );
    let e = parent
        .merge(
            &fork,
            MergeOptions {
                cwd: true,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(e, SandboxError::Invalid(_)), "{e}");
    assert_eq!(run(&parent, "ls /tmp; pwd"), "/home/user/w\n");
}

#[test]
fn a_fork_merges_again_from_where_it_was_merged() {
    let parent = sandbox();
    let fork = parent.fork().unwrap();
    run(&fork, "echo 1 > f");
    parent.merge(&fork, MergeOptions::default()).unwrap();
    // Both sides now hold f = 1; the parent changes it, the fork changes another file.
    run(&parent, "echo 2 > f");
    run(&fork, "echo g > g");
    let r = parent.merge(&fork, MergeOptions::default()).unwrap();
    assert_eq!(applied(&r), [("/home/user/g", SideChange::Added)]);
    assert_eq!(run(&parent, "cat f g"), "2\ng\n");
    // Nothing new in the fork: nothing to apply.
    assert!(
        parent
            .merge(&fork, MergeOptions::default())
            .unwrap()
            .applied
            .is_empty()
    );
}

#[test]
fn only_a_fork_of_this_sandbox_merges_into_it() {
    let parent = sandbox();
    let (a, b) = (parent.fork().unwrap(), parent.fork().unwrap());
    let grandchild = a.fork().unwrap();
    let stranger = sandbox();
    for (target, source) in [
        (&a, &b),
        (&parent, &grandchild),
        (&a, &parent),
        (&parent, &stranger),
        (&parent, &parent),
    ] {
        let e = target.merge(source, MergeOptions::default()).unwrap_err();
        assert!(matches!(e, SandboxError::Invalid(_)), "{e}");
    }
    // An atomic run that failed in the fork left nothing to merge.
    let r = a
        .run_with(
            "echo x > f; false",
            RunOptions {
                atomic: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.rolled_back);
    assert!(
        parent
            .merge(&a, MergeOptions::default())
            .unwrap()
            .applied
            .is_empty()
    );
    b.destroy();
    let e = parent.merge(&b, MergeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("destroyed"), "{e}");
    parent.destroy();
    assert!(matches!(
        parent.merge(&a, MergeOptions::default()),
        Err(SandboxError::Destroyed)
    ));
}

/// A fork point, a fork and a parent that each went through `export_payload` /
/// `from_payload` (as the service's hibernated sessions do) still merge three-way.
#[test]
fn merge_from_an_explicit_fork_point_survives_a_round_trip_through_payloads() {
    let again = |sb: &Sandbox| {
        Sandbox::from_payload(&sb.export_payload().unwrap(), SandboxOptions::default()).unwrap()
    };
    let parent = sandbox();
    run(
        &parent,
        "mkdir -p src && echo one > src/a && echo keep > b && echo gone > c",
    );
    let fork = parent.fork().unwrap();
    let base = again(&fork);
    run(
        &fork,
        "echo two > src/a && rm c && echo new > d && export FROM_FORK=1 && cd src",
    );
    run(&parent, "echo parent > e");
    let (parent, fork) = (again(&parent), again(&fork));
    // Not a fork in memory any more: only the explicit fork point relates them.
    assert!(parent.merge(&fork, MergeOptions::default()).is_err());
    let opts = MergeOptions {
        env: true,
        cwd: true,
    };
    let r = parent.merge_from(&base, &fork, opts).unwrap();
    assert_eq!(
        applied(&r),
        vec![
            ("/home/user/c", SideChange::Deleted),
            ("/home/user/d", SideChange::Added),
            ("/home/user/src/a", SideChange::Changed),
        ]
    );
    assert_eq!(r.env, vec!["FROM_FORK".to_string()]);
    assert_eq!(
        run(
            &parent,
            "pwd; cat a ../b ../d ../e; echo $FROM_FORK; ls ../c 2>&1 || true"
        ),
        "/home/user/src\ntwo\nkeep\nnew\nparent\n1\nls: cannot access '../c': No such file or directory\n"
    );
    // Both changed one path differently: a conflict that applies nothing.
    let base = again(&fork);
    run(&fork, "echo fork > ../b");
    run(&parent, "echo mine > ../b");
    match parent.merge_from(&base, &fork, MergeOptions::default()) {
        Err(SandboxError::MergeConflict(c)) => assert_eq!(c.len(), 1, "{c:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(run(&parent, "cat ../b"), "mine\n");
    assert!(
        parent
            .merge_from(&base, &parent, MergeOptions::default())
            .is_err()
    );
}
