//! Pack files as git writes and reads them: a fetched pack is checked, its deltas resolved and
//! an index (version 2) written beside it, and objects are read back from packs by id. The
//! pack stays one file instead of being exploded into loose objects, which keeps a clone inside
//! the sandbox's file-count limit and lets real git read the repository as it is.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use sha1::{Digest, Sha1};

use crate::repo::{Oid, hash_object, hex};

const COMMIT: u8 = 1;
const TREE: u8 = 2;
const BLOB: u8 = 3;
const TAG: u8 = 4;
const OFS_DELTA: u8 = 6;
const REF_DELTA: u8 = 7;

/// Largest object a pack may declare: bounds what a hostile server can make us allocate
/// before the bytes are there.
const MAX_OBJECT: usize = 1 << 30;

fn kind_name(t: u8) -> &'static str {
    match t {
        COMMIT => "commit",
        TREE => "tree",
        BLOB => "blob",
        _ => "tag",
    }
}

/// One object's header in a pack.
struct Header {
    kind: u8,
    size: usize,
    /// Where the compressed data starts.
    data: usize,
    base: Base,
}

enum Base {
    None,
    Offset(usize),
    Id(Oid),
}

fn header(pack: &[u8], at: usize) -> Result<Header, String> {
    let bad = || format!("pack is corrupt at offset {at}");
    let mut p = at;
    let mut c = *pack.get(p).ok_or_else(bad)?;
    p += 1;
    let kind = (c >> 4) & 7;
    let mut size = (c & 15) as usize;
    let mut shift = 4;
    while c & 0x80 != 0 {
        c = *pack.get(p).ok_or_else(bad)?;
        p += 1;
        if shift > 56 {
            return Err(bad());
        }
        size |= ((c & 0x7f) as usize) << shift;
        shift += 7;
    }
    if size > MAX_OBJECT {
        return Err(format!(
            "pack declares an object of {size} bytes at offset {at}"
        ));
    }
    let base = match kind {
        OFS_DELTA => {
            let mut c = *pack.get(p).ok_or_else(bad)?;
            p += 1;
            let mut back = (c & 0x7f) as usize;
            while c & 0x80 != 0 {
                c = *pack.get(p).ok_or_else(bad)?;
                p += 1;
                back = back
                    .checked_add(1)
                    .and_then(|b| b.checked_mul(128))
                    .ok_or_else(bad)?
                    | (c & 0x7f) as usize;
            }
            if back == 0 || back > at {
                return Err(bad());
            }
            Base::Offset(at - back)
        }
        REF_DELTA => {
            let id: Oid = pack.get(p..p + 20).ok_or_else(bad)?.try_into().unwrap();
            p += 20;
            Base::Id(id)
        }
        COMMIT | TREE | BLOB | TAG => Base::None,
        _ => {
            return Err(format!(
                "pack has an object of unknown type {kind} at offset {at}"
            ));
        }
    };
    Ok(Header {
        kind,
        size,
        data: p,
        base,
    })
}

/// Inflates the zlib stream at `pack[at..]`, which must give exactly `size` bytes; returns the
/// bytes and where the stream ended.
fn inflate(pack: &[u8], at: usize, size: usize) -> Result<(Vec<u8>, usize), String> {
    let mut z = flate2::Decompress::new(true);
    let mut out = Vec::with_capacity(size.min(64 << 20));
    let input = pack.get(at..).unwrap_or(&[]);
    loop {
        if out.len() == out.capacity() {
            out.reserve((size + 1 - out.len()).clamp(1, 64 << 20));
        }
        let before = (z.total_in(), z.total_out());
        let status = z
            .decompress_vec(
                &input[z.total_in() as usize..],
                &mut out,
                flate2::FlushDecompress::Finish,
            )
            .map_err(|e| format!("pack is corrupt at offset {at}: {e}"))?;
        if out.len() > size {
            return Err(format!(
                "pack object at offset {at} is longer than declared"
            ));
        }
        match status {
            flate2::Status::StreamEnd => break,
            _ if (z.total_in(), z.total_out()) == before => {
                return Err(format!("pack is truncated at offset {at}"));
            }
            _ => {}
        }
    }
    if out.len() != size {
        return Err(format!(
            "pack object at offset {at} is shorter than declared"
        ));
    }
    Ok((out, at + z.total_in() as usize))
}

fn varint(d: &[u8], p: &mut usize) -> Result<usize, String> {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let c = *d.get(*p).ok_or("delta is truncated")?;
        *p += 1;
        if shift > 56 {
            return Err("delta is corrupt".into());
        }
        v |= ((c & 0x7f) as usize) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// Applies a git delta (copy/insert instructions) to `base`.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, String> {
    let mut p = 0;
    if varint(delta, &mut p)? != base.len() {
        return Err("delta does not fit its base".into());
    }
    let size = varint(delta, &mut p)?;
    if size > MAX_OBJECT {
        return Err("delta declares an object too large".into());
    }
    let mut out = Vec::with_capacity(size);
    while p < delta.len() {
        let op = delta[p];
        p += 1;
        if op & 0x80 != 0 {
            let mut off = 0usize;
            let mut len = 0usize;
            for i in 0..4 {
                if op & (1 << i) != 0 {
                    off |= (*delta.get(p).ok_or("delta is truncated")? as usize) << (8 * i);
                    p += 1;
                }
            }
            for i in 0..3 {
                if op & (0x10 << i) != 0 {
                    len |= (*delta.get(p).ok_or("delta is truncated")? as usize) << (8 * i);
                    p += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let src = base
                .get(off..off.checked_add(len).ok_or("delta is corrupt")?)
                .ok_or("delta copies past its base")?;
            out.extend_from_slice(src);
        } else if op != 0 {
            let n = op as usize;
            out.extend_from_slice(delta.get(p..p + n).ok_or("delta is truncated")?);
            p += n;
        } else {
            return Err("delta has a reserved instruction".into());
        }
        if out.len() > size {
            return Err("delta writes past its declared size".into());
        }
    }
    if out.len() != size {
        return Err("delta result has the wrong size".into());
    }
    Ok(out)
}

/// Recently built objects of one pack by offset (delta chains share their bases).
#[derive(Default)]
struct Cache {
    map: HashMap<usize, (u8, Rc<Vec<u8>>)>,
    bytes: usize,
}

/// Resolves objects of one pack.
struct Reader<'a> {
    pack: &'a [u8],
    cache: &'a mut Cache,
}

impl Reader<'_> {
    /// The object at `at`: its kind and bytes. `by_id` finds a REF_DELTA base (its offset in
    /// this pack, or the object from elsewhere in the repository). The delta chain is walked
    /// without recursion: a hostile pack's chain of thousands must not exhaust the guest's
    /// stack.
    fn object(
        &mut self,
        at: usize,
        by_id: &dyn Fn(&Oid) -> Option<Located>,
    ) -> Result<(u8, Rc<Vec<u8>>), String> {
        // Deltas from `at` down to a base we have, outermost first.
        let mut chain: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut cur = at;
        let (kind, mut data) = loop {
            if let Some(hit) = self.cache.map.get(&cur) {
                break hit.clone();
            }
            if chain.len() > 10_000 || chain.iter().any(|(o, _)| *o == cur) {
                return Err("pack has a delta chain that is too deep or loops".into());
            }
            let h = header(self.pack, cur)?;
            let (bytes, _) = inflate(self.pack, h.data, h.size)?;
            match h.base {
                Base::None => {
                    let whole = (h.kind, Rc::new(bytes));
                    self.remember(cur, &whole);
                    break whole;
                }
                Base::Offset(b) => {
                    chain.push((cur, bytes));
                    cur = b;
                }
                Base::Id(id) => {
                    chain.push((cur, bytes));
                    match by_id(&id) {
                        Some(Located::Offset(b)) => cur = b,
                        Some(Located::Elsewhere(k, d)) => break (k, Rc::new(d)),
                        None => return Err(format!("pack's delta base {} is missing", hex(&id))),
                    }
                }
            }
        };
        while let Some((off, delta)) = chain.pop() {
            data = Rc::new(apply_delta(&data, &delta)?);
            self.remember(off, &(kind, data.clone()));
        }
        Ok((kind, data))
    }

    /// Keeps a built object for the deltas that will want it as a base, up to a budget.
    fn remember(&mut self, at: usize, obj: &(u8, Rc<Vec<u8>>)) {
        if self.cache.bytes > 96 << 20 {
            self.cache.map.clear();
            self.cache.bytes = 0;
        }
        self.cache.bytes += obj.1.len();
        self.cache.map.insert(at, obj.clone());
    }
}

/// Where a REF_DELTA's base is.
enum Located {
    Offset(usize),
    Elsewhere(u8, Vec<u8>),
}

fn kind_code(name: &str) -> u8 {
    match name {
        "commit" => COMMIT,
        "tree" => TREE,
        "blob" => BLOB,
        _ => TAG,
    }
}

/// Reads an object kept outside a pack (a thin pack's delta base): kind and bytes.
pub type ObjectSource<'a> = dyn Fn(&Oid) -> Option<(String, Vec<u8>)> + 'a;

/// A checked, indexed pack: its objects' ids and offsets.
#[derive(Debug)]
pub struct Indexed {
    /// Object count.
    pub objects: usize,
}

/// Checks `pack` (a whole pack file as a server sent it), resolves every delta and writes
/// `pack-<checksum>.pack` and `.idx` into `dir`. `elsewhere` reads an object the repository
/// already holds (a thin pack's bases).
pub fn index_pack(pack: &[u8], dir: &Path, elsewhere: &ObjectSource) -> Result<Indexed, String> {
    if pack.len() < 32 || &pack[..4] != b"PACK" {
        return Err("the server sent something that is not a pack".into());
    }
    let version = u32::from_be_bytes(pack[4..8].try_into().unwrap());
    if version != 2 && version != 3 {
        return Err(format!("pack version {version} is not supported"));
    }
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap()) as usize;
    let body = pack.len() - 20;
    let sum: [u8; 20] = Sha1::digest(&pack[..body]).into();
    if sum[..] != pack[body..] {
        return Err("pack checksum mismatch (the download is damaged or was cut)".into());
    }
    // Pass 1: every object's place, and the ids of the whole (non-delta) ones.
    let mut offsets = Vec::with_capacity(count.min(1 << 20));
    let mut crcs = Vec::with_capacity(count.min(1 << 20));
    let mut ids: Vec<Option<Oid>> = Vec::with_capacity(count.min(1 << 20));
    let mut at = 12;
    for _ in 0..count {
        if at >= body {
            return Err("pack is truncated".into());
        }
        let h = header(&pack[..body], at)?;
        let (data, end) = inflate(&pack[..body], h.data, h.size)?;
        let mut crc = flate2::Crc::new();
        crc.update(&pack[at..end]);
        offsets.push(at);
        crcs.push(crc.sum());
        ids.push(match h.base {
            Base::None => Some(hash_object(kind_name(h.kind), &data)),
            _ => None,
        });
        at = end;
    }
    if at != body {
        return Err("pack has bytes after its last object".into());
    }
    // Pass 2: deltas, until every one is resolved (a REF_DELTA may name a base that is itself
    // a delta resolved later in the same pass).
    let mut by_id: HashMap<Oid, usize> = ids
        .iter()
        .zip(&offsets)
        .filter_map(|(id, &o)| id.map(|id| (id, o)))
        .collect();
    let mut cache = Cache::default();
    let mut reader = Reader {
        pack: &pack[..body],
        cache: &mut cache,
    };
    loop {
        let mut progressed = false;
        let mut missing = None;
        for i in 0..count {
            if ids[i].is_some() {
                continue;
            }
            let map = &by_id;
            let find = |id: &Oid| -> Option<Located> {
                if let Some(&o) = map.get(id) {
                    return Some(Located::Offset(o));
                }
                let (k, d) = elsewhere(id)?;
                Some(Located::Elsewhere(kind_code(&k), d))
            };
            match reader.object(offsets[i], &find) {
                Ok((kind, data)) => {
                    let id = hash_object(kind_name(kind), &data);
                    ids[i] = Some(id);
                    by_id.insert(id, offsets[i]);
                    progressed = true;
                }
                Err(e) if e.contains("delta base") => missing = Some(e),
                Err(e) => return Err(e),
            }
        }
        if ids.iter().all(Option::is_some) {
            break;
        }
        if !progressed {
            return Err(missing.unwrap_or_else(|| "pack has unresolvable deltas".into()));
        }
    }
    let mut entries: Vec<(Oid, usize, u32)> = ids
        .into_iter()
        .zip(offsets)
        .zip(crcs)
        .map(|((id, o), c)| (id.unwrap(), o, c))
        .collect();
    entries.sort_by_key(|e| e.0);
    entries.dedup_by(|a, b| a.0 == b.0);
    let checksum: Oid = pack[body..].try_into().unwrap();
    let idx = write_idx(&entries, &checksum);
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let name = format!("pack-{}", hex(&checksum));
    let tmp = dir.join(format!("tmp_{name}.pack"));
    fs::write(&tmp, pack).map_err(|e| e.to_string())?;
    fs::rename(&tmp, dir.join(format!("{name}.pack"))).map_err(|e| e.to_string())?;
    let tmp = dir.join(format!("tmp_{name}.idx"));
    fs::write(&tmp, idx).map_err(|e| e.to_string())?;
    fs::rename(&tmp, dir.join(format!("{name}.idx"))).map_err(|e| e.to_string())?;
    Ok(Indexed {
        objects: entries.len(),
    })
}

fn write_idx(entries: &[(Oid, usize, u32)], pack_sum: &Oid) -> Vec<u8> {
    let mut out = Vec::with_capacity(1072 + entries.len() * 28);
    out.extend_from_slice(b"\xfftOc");
    out.extend_from_slice(&2u32.to_be_bytes());
    let mut fan = [0u32; 256];
    for (id, _, _) in entries {
        fan[id[0] as usize] += 1;
    }
    let mut total = 0;
    for f in fan {
        total += f;
        out.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _, _) in entries {
        out.extend_from_slice(id);
    }
    for (_, _, crc) in entries {
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, off, _) in entries {
        if *off < 0x8000_0000 {
            out.extend_from_slice(&(*off as u32).to_be_bytes());
        } else {
            out.extend_from_slice(&(0x8000_0000 | large.len() as u32).to_be_bytes());
            large.push(*off as u64);
        }
    }
    for l in large {
        out.extend_from_slice(&l.to_be_bytes());
    }
    out.extend_from_slice(pack_sum);
    let sum: [u8; 20] = Sha1::digest(&out).into();
    out.extend_from_slice(&sum);
    out
}

/// A pack on disk and its index, read when first needed.
pub struct Pack {
    path: PathBuf,
    idx: Vec<u8>,
    count: usize,
    data: std::cell::OnceCell<Result<Vec<u8>, String>>,
    cache: std::cell::RefCell<Cache>,
}

impl Pack {
    /// Opens `pack-*.idx` (version 2); `None` when it is not one this git reads.
    pub fn open(idx_path: &Path) -> Option<Pack> {
        let idx = fs::read(idx_path).ok()?;
        if idx.len() < 8 + 1024 + 40 || &idx[..8] != b"\xfftOc\0\0\0\x02" {
            return None;
        }
        let count = u32::from_be_bytes(idx[8 + 255 * 4..8 + 256 * 4].try_into().unwrap()) as usize;
        if idx.len() < 8 + 1024 + count * 28 + 40 {
            return None;
        }
        Some(Pack {
            path: idx_path.with_extension("pack"),
            idx,
            count,
            data: std::cell::OnceCell::new(),
            cache: std::cell::RefCell::default(),
        })
    }

    fn id_at(&self, i: usize) -> &[u8] {
        let start = 8 + 1024 + i * 20;
        &self.idx[start..start + 20]
    }

    /// The index positions of the ids whose first byte is `first` (the fan-out table).
    fn bucket(&self, first: u8) -> std::ops::Range<usize> {
        let fan = |b: usize| {
            u32::from_be_bytes(self.idx[8 + b * 4..12 + b * 4].try_into().unwrap()) as usize
        };
        let lo = if first == 0 {
            0
        } else {
            fan(first as usize - 1)
        };
        lo.min(self.count)..fan(first as usize).min(self.count)
    }

    fn find(&self, id: &Oid) -> Option<usize> {
        let std::ops::Range { start: lo, end: hi } = self.bucket(id[0]);
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.id_at(mid).cmp(&id[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.offset_at(mid)),
            }
        }
        None
    }

    fn offset_at(&self, i: usize) -> usize {
        let base = 8 + 1024 + self.count * 24;
        let o = u32::from_be_bytes(self.idx[base + i * 4..base + i * 4 + 4].try_into().unwrap());
        if o & 0x8000_0000 == 0 {
            return o as usize;
        }
        let large = base + self.count * 4 + (o & 0x7fff_ffff) as usize * 8;
        self.idx.get(large..large + 8).map_or(usize::MAX, |b| {
            u64::from_be_bytes(b.try_into().unwrap()) as usize
        })
    }

    /// Whether the pack holds `id`.
    pub fn contains(&self, id: &Oid) -> bool {
        self.find(id).is_some()
    }

    /// Ids in the pack starting with the hex `prefix`.
    pub fn with_prefix(&self, prefix: &str) -> Vec<Oid> {
        // The first two digits name the fan-out bucket: only its ids need looking at.
        let range = match prefix.get(..2).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(first) => self.bucket(first),
            None => 0..self.count,
        };
        range
            .map(|i| -> Oid { self.id_at(i).try_into().unwrap() })
            .filter(|id| hex(id).starts_with(prefix))
            .collect()
    }

    /// Reads `id` from this pack; `Ok(None)` when it is not here. `other` reads a REF_DELTA
    /// base kept outside this pack.
    pub fn read(
        &self,
        id: &Oid,
        other: &ObjectSource<'_>,
    ) -> Result<Option<(String, Vec<u8>)>, String> {
        let Some(at) = self.find(id) else {
            return Ok(None);
        };
        let data = self
            .data
            .get_or_init(|| {
                fs::read(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let body = data.len().saturating_sub(20);
        let mut cache = self.cache.borrow_mut();
        let mut reader = Reader {
            pack: &data[..body],
            cache: &mut cache,
        };
        let find = |id: &Oid| -> Option<Located> {
            if let Some(o) = self.find(id) {
                return Some(Located::Offset(o));
            }
            let (k, d) = other(id)?;
            Some(Located::Elsewhere(kind_code(&k), d))
        };
        let (kind, bytes) = reader.object(at, &find)?;
        Ok(Some((
            kind_name(kind).to_string(),
            Rc::try_unwrap(bytes).unwrap_or_else(|rc| (*rc).clone()),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("host git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out.stdout
    }

    /// A pack real git wrote (deltas of both kinds, a big file) indexes to the very bytes of
    /// git's own index, and every object reads back as `git cat-file` shows it.
    #[test]
    fn index_matches_gits_and_objects_read_back() {
        let dir = std::env::temp_dir().join(format!("wasm-git-pack-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        let mut text: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        for round in 0..6 {
            text = text.replace(
                &format!("line {}\n", round * 7),
                &format!("changed {round}\n"),
            );
            fs::write(dir.join("big.txt"), &text).unwrap();
            fs::write(dir.join(format!("f{round}.txt")), format!("{round}\n")).unwrap();
            git(&dir, &["add", "."]);
            git(&dir, &["commit", "-q", "-m", &format!("round {round}")]);
        }
        git(&dir, &["tag", "-a", "v1", "-m", "tag"]);
        git(&dir, &["repack", "-adq", "--depth=50", "--window=50"]);
        let packdir = dir.join(".git/objects/pack");
        let name = fs::read_dir(&packdir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "pack"))
            .unwrap();
        let pack = fs::read(&name).unwrap();
        let theirs = fs::read(name.with_extension("idx")).unwrap();
        let out = dir.join("ours");
        let got = index_pack(&pack, &out, &|_| None).unwrap();
        let ours_name = out.join(name.file_name().unwrap()).with_extension("idx");
        assert_eq!(
            fs::read(&ours_name).unwrap(),
            theirs,
            "idx differs from git's"
        );
        let listing = String::from_utf8(git(
            &dir,
            &["cat-file", "--batch-all-objects", "--batch-check"],
        ))
        .unwrap();
        assert_eq!(listing.lines().count(), got.objects);
        let p = Pack::open(&ours_name).unwrap();
        for line in listing.lines() {
            let mut f = line.split(' ');
            let (id, kind) = (f.next().unwrap(), f.next().unwrap());
            let (k, data) = p
                .read(&crate::repo::parse_hex(id).unwrap(), &|_| None)
                .unwrap()
                .unwrap();
            assert_eq!(k, kind);
            assert_eq!(data, git(&dir, &["cat-file", kind, id]), "{id}");
        }
        // Hostile packs (a valid trailer over damaged objects) are refused or indexed, never
        // a panic: each of many single-byte corruptions, at every kind of place.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let body = pack.len() - 20;
        for round in 0..300 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut bad = pack[..body].to_vec();
            let at = 12 + (seed as usize) % (body - 12);
            bad[at] = bad[at].wrapping_add(1 + (seed >> 32) as u8 % 255);
            let sum: [u8; 20] = Sha1::digest(&bad).into();
            bad.extend_from_slice(&sum);
            let out = dir.join(format!("fuzz{round}"));
            if index_pack(&bad, &out, &|_| None).is_ok() {
                let idx = fs::read_dir(&out)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .find(|p| p.extension().is_some_and(|x| x == "idx"))
                    .unwrap();
                let p = Pack::open(&idx).unwrap();
                for i in 0..p.count {
                    let id: Oid = p.id_at(i).try_into().unwrap();
                    let _ = p.read(&id, &|_| None);
                }
            }
        }
        for len in [0usize, 1, 2, 5, 9] {
            let _ = apply_delta(&pack[..len.min(pack.len())], &pack[12..12 + len * 7]);
        }
        // A damaged or cut pack is refused with a reason, not indexed.
        let mut bad = pack.clone();
        bad[40] ^= 0xff;
        assert!(
            index_pack(&bad, &dir.join("bad"), &|_| None)
                .unwrap_err()
                .contains("checksum")
        );
        assert!(index_pack(&pack[..pack.len() / 2], &dir.join("bad"), &|_| None).is_err());
        let _ = fs::remove_dir_all(&dir);
    }

    /// A pack of one REF_DELTA whose base is nowhere: refused by name, nothing written.
    #[test]
    fn a_delta_without_its_base_is_refused() {
        use std::io::Write as _;
        let delta = [5u8, 5, 0x90, 5];
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        pack.push((REF_DELTA << 4) | delta.len() as u8);
        pack.extend_from_slice(&[7u8; 20]);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&delta).unwrap();
        pack.extend(z.finish().unwrap());
        let sum: [u8; 20] = Sha1::digest(&pack).into();
        pack.extend_from_slice(&sum);
        let dir = std::env::temp_dir().join(format!("wasm-git-thin-{}", std::process::id()));
        let e = index_pack(&pack, &dir, &|_| None).unwrap_err();
        assert!(e.contains("delta base 0707070707"), "{e}");
        assert!(!dir.exists());
    }

    #[test]
    fn deltas_copy_and_insert() {
        let base = b"hello world, hello git";
        // source 22, target 16: copy 0..6 ("hello "), insert "pack", copy 12..18 (" hello").
        let delta = [22, 16, 0x90, 6, 4, b'p', b'a', b'c', b'k', 0x91, 12, 6];
        assert_eq!(apply_delta(base, &delta).unwrap(), b"hello pack hello");
        assert!(apply_delta(b"short", &delta).is_err());
        assert!(apply_delta(base, &[22, 5, 0]).is_err());
    }
}
