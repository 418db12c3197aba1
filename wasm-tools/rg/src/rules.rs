//! Which walked entries ignore files, hidden names and globs leave out, decided the way the
//! `ignore` crate's own walker decides it, but computed here.
//!
//! The crate finds the ignore files of the directories *above* a searched path through
//! `Path::canonicalize`, which WASI does not have: inside the sandbox it silently found none,
//! so below a repository's root not even the walked directories' `.gitignore` applied (they
//! count only inside a repository, and the `.git` was above). So the walker's own ignore
//! handling is switched off and this filter applies the same rules on absolute paths: every
//! directory from the entry up to `/` contributes its `.rgignore`, `.ignore`, `.gitignore`
//! and `.git/info/exclude` (those above the searched path only without
//! `--no-ignore-parent`), the nearest match of each kind wins, kinds rank `.rgignore` >
//! `.ignore` > `.gitignore` > exclude > global > `--ignore-file`, `.gitignore` counts only
//! inside a repository and not above its root, overrides (`-g`) come first, and a hidden
//! name is skipped unless a rule or type whitelisted it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use ignore::types::Types;
use ignore::{DirEntry, Match};

use crate::args::Args;

/// The ignore files of one directory.
struct DirRules {
    custom: Gitignore,
    dot: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
    has_git: bool,
}

pub struct Rules {
    root: PathBuf,
    overrides: Override,
    types: Types,
    hidden: bool,
    custom: bool,
    dot: bool,
    git: bool,
    exclude: bool,
    parents: bool,
    require_git: bool,
    case_insensitive: bool,
    global: Gitignore,
    explicit: Vec<Gitignore>,
    dirs: Mutex<HashMap<PathBuf, Arc<DirRules>>>,
}

impl Rules {
    pub fn new(args: &Args, root: &Path, cwd: &Path, overrides: Override, types: Types) -> Rules {
        let ignore = !args.no_ignore;
        let git = ignore && !args.no_ignore_vcs;
        let global = if git && !args.no_ignore_global {
            let (gi, err) = GitignoreBuilder::new(cwd).build_global();
            if let Some(e) = err {
                crate::warn(&e);
            }
            gi
        } else {
            Gitignore::empty()
        };
        let mut explicit = Vec::new();
        if !args.no_ignore_files {
            for f in &args.ignore_files {
                let mut b = GitignoreBuilder::new(cwd);
                b.case_insensitive(args.ignore_file_case_insensitive).ok();
                if let Some(e) = b.add(f) {
                    crate::warn(&e);
                }
                match b.build() {
                    Ok(gi) => explicit.push(gi),
                    Err(e) => crate::warn(&e),
                }
            }
        }
        Rules {
            root: root.to_path_buf(),
            overrides,
            types,
            hidden: !args.hidden,
            // ripgrep 13 reads `.rgignore` even under `--no-ignore-dot` (which names
            // `.ignore`).
            custom: ignore,
            dot: ignore && !args.no_ignore_dot,
            git,
            exclude: git && !args.no_ignore_exclude,
            parents: ignore && !args.no_ignore_parent,
            require_git: !args.no_require_git,
            case_insensitive: args.ignore_file_case_insensitive,
            global,
            explicit,
            dirs: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the walk keeps `dent` (never asked for the paths named on the command line).
    pub fn keep(&self, dent: &DirEntry) -> bool {
        let path = dent.path();
        let is_dir = dent.file_type().is_some_and(|t| t.is_dir());
        // The walker has already dropped what an override ignores; one that whitelists
        // settles it.
        if !self.overrides.matched(path, is_dir).is_none() {
            return true;
        }
        let m = self.matched(path, is_dir);
        if m.is_ignore() {
            return false;
        }
        // The walker has applied `-t/-T` exclusions; a type's whitelist, like an ignore
        // file's, lets a hidden name through.
        let whitelisted = m.is_whitelist() || self.types.matched(path, is_dir).is_whitelist();
        if !whitelisted
            && self.hidden
            && path
                .file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
        {
            return false;
        }
        true
    }

    fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        let dirs: Vec<(bool, Arc<DirRules>)> = path
            .ancestors()
            .skip(1)
            .map(|d| (d.starts_with(&self.root), self.dir(d)))
            .collect();
        let any_git = !self.require_git || dirs.iter().any(|(_, d)| d.has_git);
        let (mut custom, mut dot, mut git, mut exclude) =
            (Match::None, Match::None, Match::None, Match::None);
        let mut saw_git = false;
        for (inside, d) in &dirs {
            if *inside || self.parents {
                let m = |gi: &Gitignore| gi.matched(path, is_dir).map(|_| ());
                if custom.is_none() {
                    custom = m(&d.custom);
                }
                if dot.is_none() {
                    dot = m(&d.dot);
                }
                if any_git && !saw_git && git.is_none() {
                    git = m(&d.git);
                }
                if any_git && !saw_git && exclude.is_none() {
                    exclude = m(&d.exclude);
                }
            }
            saw_git = saw_git || d.has_git;
        }
        let global = if any_git {
            self.global.matched(path, is_dir).map(|_| ())
        } else {
            Match::None
        };
        let explicit = self
            .explicit
            .iter()
            .rev()
            .map(|gi| gi.matched(path, is_dir).map(|_| ()))
            .find(|m| !m.is_none())
            .unwrap_or(Match::None);
        custom.or(dot).or(git).or(exclude).or(global).or(explicit)
    }

    fn dir(&self, dir: &Path) -> Arc<DirRules> {
        let mut dirs = self.dirs.lock().unwrap();
        if let Some(d) = dirs.get(dir) {
            return d.clone();
        }
        let load = |on: bool, file: PathBuf| -> Gitignore {
            if !on || !file.is_file() {
                return Gitignore::empty();
            }
            let mut b = GitignoreBuilder::new(dir);
            b.case_insensitive(self.case_insensitive).ok();
            if let Some(e) = b.add(&file) {
                crate::warn(&e);
            }
            b.build().unwrap_or_else(|e| {
                crate::warn(&e);
                Gitignore::empty()
            })
        };
        let git_dir = dir.join(".git");
        let has_git_dir = git_dir.exists();
        let d = Arc::new(DirRules {
            custom: load(self.custom, dir.join(".rgignore")),
            dot: load(self.dot, dir.join(".ignore")),
            git: load(self.git, dir.join(".gitignore")),
            exclude: load(
                self.exclude && has_git_dir,
                git_dir.join("info").join("exclude"),
            ),
            // A repository's root bounds the `.gitignore` files that apply even under
            // `--no-require-git`, as in ripgrep 13 (the crate's current walker drops the
            // bound along with the requirement).
            has_git: (self.git || self.exclude) && has_git_dir,
        });
        dirs.insert(dir.to_path_buf(), d.clone());
        d
    }
}
