//! The repository on disk in git's own formats, so that real git reads it: loose objects
//! (zlib, `type size\0data`, SHA-1 names), the index (version 2), refs and HEAD.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

use crate::pack::Pack;

pub type Oid = [u8; 20];

pub fn hex(oid: &Oid) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_hex(s: &str) -> Option<Oid> {
    if s.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub struct Repo {
    /// The work tree's root (absolute).
    pub root: PathBuf,
    pub git: PathBuf,
    /// The packs in `objects/pack`, opened when an object is first not found loose.
    packs: std::cell::RefCell<Option<std::rc::Rc<Vec<Pack>>>>,
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub oid: Oid,
    pub size: u32,
    pub mtime: u32,
}

pub fn hash_object(kind: &str, data: &[u8]) -> Oid {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", data.len()).as_bytes());
    h.update(data);
    h.finalize().into()
}

impl Repo {
    pub fn at(root: PathBuf, git: PathBuf) -> Repo {
        Repo {
            root,
            git,
            packs: Default::default(),
        }
    }

    fn packs(&self) -> std::rc::Rc<Vec<Pack>> {
        self.packs
            .borrow_mut()
            .get_or_insert_with(|| {
                let mut list: Vec<PathBuf> = fs::read_dir(self.git.join("objects/pack"))
                    .map(|rd| {
                        rd.flatten()
                            .map(|e| e.path())
                            .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                            .collect()
                    })
                    .unwrap_or_default();
                list.sort();
                std::rc::Rc::new(list.iter().filter_map(|p| Pack::open(p)).collect())
            })
            .clone()
    }

    /// Forgets the packs opened so far (a fetch has just added one).
    pub fn reload_packs(&self) {
        *self.packs.borrow_mut() = None;
    }

    fn read_loose(&self, oid: &Oid) -> Option<(String, Vec<u8>)> {
        let raw = fs::read(self.object_path(&hex(oid))).ok()?;
        inflate_loose(&raw).ok()
    }

    /// The repository containing `start` (its `.git` directory found upwards).
    pub fn discover(start: &Path) -> Option<Repo> {
        let mut dir = Some(start);
        while let Some(d) = dir {
            let g = d.join(".git");
            if g.join("HEAD").is_file() {
                return Some(Repo::at(d.to_path_buf(), g));
            }
            dir = d.parent();
        }
        None
    }

    fn object_path(&self, h: &str) -> PathBuf {
        self.git.join("objects").join(&h[..2]).join(&h[2..])
    }

    pub fn write_object(&self, kind: &str, data: &[u8]) -> std::io::Result<Oid> {
        let oid = hash_object(kind, data);
        let h = hex(&oid);
        let path = self.object_path(&h);
        if path.exists() {
            return Ok(oid);
        }
        fs::create_dir_all(path.parent().unwrap())?;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(format!("{kind} {}\0", data.len()).as_bytes())?;
        z.write_all(data)?;
        let bytes = z.finish()?;
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, bytes)?;
        fs::rename(&tmp, &path)?;
        Ok(oid)
    }

    pub fn read_object(&self, oid: &Oid) -> Result<(String, Vec<u8>), String> {
        let h = hex(oid);
        if let Ok(raw) = fs::read(self.object_path(&h)) {
            return inflate_loose(&raw).map_err(|e| format!("corrupt object {h}: {e}"));
        }
        for p in self.packs().iter() {
            if let Some(found) = p.read(oid, &|id| self.read_loose(id))? {
                return Ok(found);
            }
        }
        Err(format!("bad object {h}"))
    }

    pub fn has_object(&self, oid: &Oid) -> bool {
        self.object_path(&hex(oid)).exists() || self.packs().iter().any(|p| p.contains(oid))
    }

    /// Every object id starting with `prefix` (4 to 40 hex digits).
    pub fn objects_with_prefix(&self, prefix: &str) -> Vec<Oid> {
        let mut out = Vec::new();
        if prefix.len() < 4 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return out;
        }
        let prefix = prefix.to_ascii_lowercase();
        for p in self.packs().iter() {
            out.extend(p.with_prefix(&prefix));
        }
        let dir = self.git.join("objects").join(&prefix[..2]);
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let full = format!("{}{}", &prefix[..2], name);
                if full.starts_with(&prefix)
                    && let Some(o) = parse_hex(&full)
                    && !out.contains(&o)
                {
                    out.push(o);
                }
            }
        }
        out
    }

    // ---- refs ----

    /// HEAD: `Ok(branch)` when it names a branch (`refs/heads/x` → `x`), `Err(oid)` when
    /// detached.
    pub fn head(&self) -> Result<String, Oid> {
        let text = fs::read_to_string(self.git.join("HEAD")).unwrap_or_default();
        let text = text.trim();
        if let Some(r) = text.strip_prefix("ref: ") {
            return Ok(r.strip_prefix("refs/heads/").unwrap_or(r).to_string());
        }
        Err(parse_hex(text).unwrap_or([0; 20]))
    }

    pub fn read_ref(&self, name: &str) -> Option<Oid> {
        if let Ok(t) = fs::read_to_string(self.git.join(name)) {
            let t = t.trim();
            if let Some(r) = t.strip_prefix("ref: ") {
                return self.read_ref(r);
            }
            return parse_hex(t);
        }
        let packed = fs::read_to_string(self.git.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| {
            let (h, n) = l.split_once(' ')?;
            (n == name).then(|| parse_hex(h)).flatten()
        })
    }

    pub fn head_oid(&self) -> Option<Oid> {
        match self.head() {
            Ok(b) => self.read_ref(&format!("refs/heads/{b}")),
            Err(o) => Some(o),
        }
    }

    pub fn write_ref(
        &self,
        name: &str,
        oid: &Oid,
        old: Option<Oid>,
        msg: &str,
    ) -> std::io::Result<()> {
        let path = self.git.join(name);
        fs::create_dir_all(path.parent().unwrap())?;
        fs::write(&path, format!("{}\n", hex(oid)))?;
        self.reflog(name, old, oid, msg)
    }

    pub fn reflog(
        &self,
        name: &str,
        old: Option<Oid>,
        new: &Oid,
        msg: &str,
    ) -> std::io::Result<()> {
        let path = self.git.join("logs").join(name);
        fs::create_dir_all(path.parent().unwrap())?;
        let (who, when) = crate::ident(self, "COMMITTER");
        let line = format!(
            "{} {} {who} {when}\t{msg}\n",
            hex(&old.unwrap_or([0; 20])),
            hex(new)
        );
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(line.as_bytes())
    }

    /// Moves what HEAD points at (the branch, or HEAD itself when detached) to `oid`.
    pub fn update_head(&self, oid: &Oid, msg: &str) -> std::io::Result<()> {
        let old = self.head_oid();
        match self.head() {
            Ok(b) => {
                self.write_ref(&format!("refs/heads/{b}"), oid, old, msg)?;
                self.reflog("HEAD", old, oid, msg)
            }
            Err(_) => self.write_ref("HEAD", oid, old, msg),
        }
    }

    pub fn branches(&self) -> Vec<(String, Oid)> {
        self.refs()
            .into_iter()
            .filter_map(|(n, o)| Some((n.strip_prefix("refs/heads/")?.to_string(), o)))
            .collect()
    }

    /// Every ref under `refs/`, loose and packed (a loose one wins): full name → id.
    pub fn refs(&self) -> BTreeMap<String, Oid> {
        let mut out = BTreeMap::new();
        if let Ok(p) = fs::read_to_string(self.git.join("packed-refs")) {
            for l in p.lines() {
                if let Some((h, n)) = l.split_once(' ')
                    && let Some(o) = parse_hex(h)
                {
                    out.insert(n.to_string(), o);
                }
            }
        }
        fn walk(dir: &Path, name: &str, out: &mut BTreeMap<String, Oid>) {
            let Ok(rd) = fs::read_dir(dir) else { return };
            for e in rd.flatten() {
                let n = format!("{name}/{}", e.file_name().to_string_lossy());
                if e.path().is_dir() {
                    walk(&e.path(), &n, out);
                } else if let Some(o) = fs::read_to_string(e.path())
                    .ok()
                    .and_then(|t| parse_hex(t.trim()))
                {
                    out.insert(n, o);
                }
            }
        }
        walk(&self.git.join("refs"), "refs", &mut out);
        out
    }

    // ---- index ----

    pub fn read_index(&self) -> Result<Vec<Entry>, String> {
        let Ok(data) = fs::read(self.git.join("index")) else {
            return Ok(Vec::new());
        };
        if data.len() < 12 || &data[..4] != b"DIRC" {
            return Err("index file corrupt".into());
        }
        let version = u32::from_be_bytes(data[4..8].try_into().unwrap());
        if version != 2 && version != 3 {
            return Err(format!("index version {version} is not supported"));
        }
        let count = u32::from_be_bytes(data[8..12].try_into().unwrap()) as usize;
        let mut pos = 12;
        let mut out = Vec::with_capacity(count);
        let be = |p: usize| u32::from_be_bytes(data[p..p + 4].try_into().unwrap());
        for _ in 0..count {
            if pos + 62 > data.len() {
                return Err("index file corrupt".into());
            }
            let mtime = be(pos + 8);
            let mode = be(pos + 24);
            let size = be(pos + 36);
            let oid: Oid = data[pos + 40..pos + 60].try_into().unwrap();
            let flags = u16::from_be_bytes([data[pos + 60], data[pos + 61]]);
            let mut start = pos + 62;
            if version >= 3 && flags & 0x4000 != 0 {
                start += 2;
            }
            let end = start
                + data[start..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("index file corrupt")?;
            let path = String::from_utf8_lossy(&data[start..end]).into_owned();
            let len = end - pos;
            pos += (len + 8) & !7;
            out.push(Entry {
                path,
                mode,
                oid,
                size,
                mtime,
            });
        }
        Ok(out)
    }

    pub fn write_index(&self, entries: &mut [Entry]) -> std::io::Result<()> {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let mut out = Vec::new();
        out.extend_from_slice(b"DIRC");
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for e in entries.iter() {
            let start = out.len();
            for v in [e.mtime, 0, e.mtime, 0, 0, 0, e.mode, 0, 0, e.size] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&e.oid);
            let flags = e.path.len().min(0xfff) as u16;
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(e.path.as_bytes());
            let len = out.len() - start;
            let padded = (len + 8) & !7;
            out.resize(start + padded, 0);
        }
        let sum: [u8; 20] = Sha1::digest(&out).into();
        out.extend_from_slice(&sum);
        let tmp = self.git.join("index.lock");
        fs::write(&tmp, out)?;
        fs::rename(tmp, self.git.join("index"))
    }

    // ---- trees and commits ----

    /// Writes the trees of `entries` (sorted by path) and returns the root tree's id.
    pub fn write_tree(&self, entries: &[Entry]) -> std::io::Result<Oid> {
        self.write_tree_at(entries, "")
    }

    fn write_tree_at(&self, entries: &[Entry], prefix: &str) -> std::io::Result<Oid> {
        // (name, is_tree, mode, oid)
        let mut items: Vec<(String, bool, u32, Oid)> = Vec::new();
        let mut i = 0;
        while i < entries.len() {
            let rest = &entries[i].path[prefix.len()..];
            if let Some(slash) = rest.find('/') {
                let dir = &rest[..slash];
                let sub = format!("{prefix}{dir}/");
                let mut j = i;
                while j < entries.len() && entries[j].path.starts_with(&sub) {
                    j += 1;
                }
                let oid = self.write_tree_at(&entries[i..j], &sub)?;
                items.push((dir.to_string(), true, 0o40000, oid));
                i = j;
            } else {
                items.push((rest.to_string(), false, entries[i].mode, entries[i].oid));
                i += 1;
            }
        }
        // Git orders a tree's entries as if directories' names ended with '/'.
        items.sort_by(|a, b| {
            let ka = if a.1 {
                format!("{}/", a.0)
            } else {
                a.0.clone()
            };
            let kb = if b.1 {
                format!("{}/", b.0)
            } else {
                b.0.clone()
            };
            ka.as_bytes().cmp(kb.as_bytes())
        });
        let mut data = Vec::new();
        for (name, _, mode, oid) in items {
            data.extend_from_slice(format!("{mode:o} {name}\0").as_bytes());
            data.extend_from_slice(&oid);
        }
        self.write_object("tree", &data)
    }

    /// Every file of a tree: path → (mode, blob id).
    pub fn read_tree(&self, oid: &Oid) -> Result<BTreeMap<String, (u32, Oid)>, String> {
        let mut out = BTreeMap::new();
        self.read_tree_into(oid, "", &mut out)?;
        Ok(out)
    }

    fn read_tree_into(
        &self,
        oid: &Oid,
        prefix: &str,
        out: &mut BTreeMap<String, (u32, Oid)>,
    ) -> Result<(), String> {
        let (kind, data) = self.read_object(oid)?;
        if kind != "tree" {
            return Err(format!("{} is not a tree", hex(oid)));
        }
        let mut pos = 0;
        while pos < data.len() {
            let sp = pos
                + data[pos..]
                    .iter()
                    .position(|&b| b == b' ')
                    .ok_or("bad tree")?;
            let nul = sp + data[sp..].iter().position(|&b| b == 0).ok_or("bad tree")?;
            let mode = u32::from_str_radix(&String::from_utf8_lossy(&data[pos..sp]), 8)
                .map_err(|_| "bad tree")?;
            let name = String::from_utf8_lossy(&data[sp + 1..nul]).into_owned();
            let child: Oid = data[nul + 1..nul + 21].try_into().map_err(|_| "bad tree")?;
            pos = nul + 21;
            let path = format!("{prefix}{name}");
            if mode == 0o40000 {
                self.read_tree_into(&child, &format!("{path}/"), out)?;
            } else {
                out.insert(path, (mode, child));
            }
        }
        Ok(())
    }

    /// What `oid` stands for where a commit is wanted: an annotated tag is followed to what
    /// it tags (as git's commit-ish lookups do); anything else is itself.
    pub fn peel(&self, oid: &Oid) -> Oid {
        let mut o = *oid;
        for _ in 0..16 {
            match self.read_object(&o) {
                Ok((k, data)) if k == "tag" => {
                    match String::from_utf8_lossy(&data)
                        .lines()
                        .next()
                        .and_then(|l| l.strip_prefix("object "))
                        .and_then(parse_hex)
                    {
                        Some(n) => o = n,
                        None => return o,
                    }
                }
                _ => return o,
            }
        }
        o
    }

    pub fn read_commit(&self, oid: &Oid) -> Result<Commit, String> {
        let oid = &self.peel(oid);
        let (kind, data) = self.read_object(oid)?;
        if kind != "commit" {
            return Err(format!("{} is a {kind}, not a commit", hex(oid)));
        }
        let text = String::from_utf8_lossy(&data).into_owned();
        let (head, message) = text.split_once("\n\n").unwrap_or((&text, ""));
        let mut c = Commit {
            tree: [0; 20],
            parents: Vec::new(),
            author: String::new(),
            committer: String::new(),
            message: message.to_string(),
        };
        for line in head.lines() {
            if let Some(t) = line.strip_prefix("tree ") {
                c.tree = parse_hex(t).unwrap_or([0; 20]);
            } else if let Some(p) = line.strip_prefix("parent ") {
                c.parents.extend(parse_hex(p));
            } else if let Some(a) = line.strip_prefix("author ") {
                c.author = a.to_string();
            } else if let Some(a) = line.strip_prefix("committer ") {
                c.committer = a.to_string();
            }
        }
        // A shallow clone's boundary commits have parents it does not hold: as git does,
        // history ends there.
        if !c.parents.is_empty() && self.is_shallow(oid) {
            c.parents.clear();
        }
        Ok(c)
    }

    /// Whether `.git/shallow` lists `oid` (a commit whose parents were not fetched).
    fn is_shallow(&self, oid: &Oid) -> bool {
        let h = hex(oid);
        fs::read_to_string(self.git.join("shallow")).is_ok_and(|s| s.lines().any(|l| l.trim() == h))
    }
}

/// A loose object's bytes: zlib of `kind size\0data`.
fn inflate_loose(raw: &[u8]) -> Result<(String, Vec<u8>), String> {
    let mut data = Vec::new();
    flate2::read::ZlibDecoder::new(raw)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    let nul = data.iter().position(|&b| b == 0).ok_or("no header")?;
    let header = String::from_utf8_lossy(&data[..nul]).into_owned();
    let kind = header.split(' ').next().unwrap_or("").to_string();
    data.drain(..=nul);
    Ok((kind, data))
}

pub struct Commit {
    pub tree: Oid,
    pub parents: Vec<Oid>,
    pub author: String,
    pub committer: String,
    pub message: String,
}

impl Commit {
    pub fn subject(&self) -> String {
        self.message.lines().next().unwrap_or("").to_string()
    }
}
