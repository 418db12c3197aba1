//! `file`'s description of an ELF object: class, byte order, type (PIE told apart from a
//! shared object by DF_1_PIE), machine, OS ABI, linking, interpreter, build id, ABI note,
//! stripped or not.

use crate::file::Kind;

struct Elf<'a> {
    d: &'a [u8],
    is64: bool,
    le: bool,
}

impl Elf<'_> {
    fn u16(&self, at: usize) -> u64 {
        let Some(b) = self.d.get(at..at + 2) else {
            return 0;
        };
        u64::from(if self.le {
            u16::from_le_bytes([b[0], b[1]])
        } else {
            u16::from_be_bytes([b[0], b[1]])
        })
    }

    fn u32(&self, at: usize) -> u64 {
        let Some(b) = self.d.get(at..at + 4) else {
            return 0;
        };
        let a = [b[0], b[1], b[2], b[3]];
        u64::from(if self.le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }

    fn word(&self, at: usize) -> u64 {
        if !self.is64 {
            return self.u32(at);
        }
        let Some(b) = self.d.get(at..at + 8) else {
            return 0;
        };
        let a: [u8; 8] = b.try_into().unwrap_or([0; 8]);
        if self.le {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        }
    }
}

pub fn describe(d: &[u8]) -> Kind {
    let e = Elf {
        d,
        is64: d.get(4) == Some(&2),
        le: d.get(5) != Some(&2),
    };
    let w = if e.is64 { 8 } else { 4 };
    let etype = e.u16(16);
    let machine = match e.u16(18) {
        3 => "Intel 80386".to_string(),
        8 => "MIPS, MIPS-I".to_string(),
        20 => "PowerPC or cisco 4500".to_string(),
        21 => "64-bit PowerPC or cisco 7500".to_string(),
        40 => "ARM".to_string(),
        62 => "x86-64".to_string(),
        183 => "ARM aarch64".to_string(),
        243 => "UCB RISC-V".to_string(),
        0 => "no machine".to_string(),
        n => format!("*unknown arch {n:#x}*"),
    };
    let abi = match d.get(7) {
        Some(0) => "SYSV",
        Some(3) => "GNU/Linux",
        Some(9) => "FreeBSD",
        _ => "unknown",
    };
    let phoff = e.word(24 + w) as usize;
    let (phentsize, phnum) = if e.is64 {
        (e.u16(54) as usize, e.u16(56) as usize)
    } else {
        (e.u16(42) as usize, e.u16(44) as usize)
    };
    let shoff = e.word(24 + 2 * w) as usize;
    let (shentsize, shnum) = if e.is64 {
        (e.u16(58) as usize, e.u16(60) as usize)
    } else {
        (e.u16(46) as usize, e.u16(48) as usize)
    };
    let mut interp = None;
    let mut dynamic = false;
    let mut pie = false;
    let mut notes: Vec<(usize, usize)> = Vec::new();
    for k in 0..phnum.min(256) {
        let p = phoff + k * phentsize;
        let ptype = e.u32(p);
        let (off, size) = if e.is64 {
            (e.word(p + 8) as usize, e.word(p + 32) as usize)
        } else {
            (e.u32(p + 4) as usize, e.u32(p + 16) as usize)
        };
        match ptype {
            2 => {
                dynamic = true;
                // DT_FLAGS_1 (0x6ffffffb) with DF_1_PIE.
                let mut q = off;
                while q + 2 * w <= (off + size).min(d.len()) {
                    let tag = e.word(q);
                    if tag == 0 {
                        break;
                    }
                    if tag == 0x6fff_fffb && e.word(q + w) & 0x0800_0000 != 0 {
                        pie = true;
                    }
                    q += 2 * w;
                }
            }
            3 => {
                if let Some(b) = d.get(off..off + size) {
                    interp = Some(
                        String::from_utf8_lossy(b)
                            .trim_end_matches('\0')
                            .to_string(),
                    );
                }
            }
            4 => notes.push((off, size)),
            _ => {}
        }
    }
    let shstrndx = e.u16(if e.is64 { 62 } else { 50 }) as usize;
    let shstr_off = {
        let s = shoff + shstrndx * shentsize;
        if e.is64 {
            e.word(s + 24)
        } else {
            e.u32(s + 16)
        }
    } as usize;
    let mut debug_info = false;
    let mut has_symtab = false;
    for k in 0..shnum.min(4096) {
        let s = shoff + k * shentsize;
        let stype = e.u32(s + 4);
        if stype == 2 {
            has_symtab = true;
        }
        let name_at = shstr_off + e.u32(s) as usize;
        if shnum > 0 && d.get(name_at..name_at + 12) == Some(b".debug_info\0") {
            debug_info = true;
        }
        if phnum == 0 && stype == 7 {
            let (off, size) = if e.is64 {
                (e.word(s + 24) as usize, e.word(s + 32) as usize)
            } else {
                (e.u32(s + 16) as usize, e.u32(s + 20) as usize)
            };
            notes.push((off, size));
        }
    }
    let kind_name = match etype {
        1 => "relocatable",
        2 => "executable",
        3 if pie => "pie executable",
        3 => "shared object",
        4 => "core file",
        _ => "unknown type",
    };
    let mut s = format!(
        "ELF {}-bit {} {kind_name}, {machine}, version {} ({abi})",
        if e.is64 { 64 } else { 32 },
        if e.le { "LSB" } else { "MSB" },
        d.get(6).copied().unwrap_or(0)
    );
    if etype == 2 || etype == 3 {
        s.push_str(if dynamic || interp.is_some() {
            ", dynamically linked"
        } else {
            ", statically linked"
        });
    }
    if let Some(i) = &interp {
        s.push_str(&format!(", interpreter {i}"));
    }
    for (off, size) in notes {
        let mut q = off;
        let end = (off + size).min(d.len());
        while q + 12 <= end {
            let namesz = e.u32(q) as usize;
            let descsz = e.u32(q + 4) as usize;
            let ntype = e.u32(q + 8);
            let name_at = q + 12;
            let desc_at = name_at + namesz.div_ceil(4) * 4;
            let next = desc_at + descsz.div_ceil(4) * 4;
            if next > end {
                break;
            }
            if d.get(name_at..name_at + namesz) == Some(b"GNU\0") {
                let desc = &d[desc_at..desc_at + descsz];
                if ntype == 3 {
                    let algo = match descsz {
                        20 => "sha1",
                        16 => "md5/uuid",
                        8 => "xxHash",
                        _ => "unknown",
                    };
                    let hex: String = desc.iter().map(|b| format!("{b:02x}")).collect();
                    s.push_str(&format!(", BuildID[{algo}]={hex}"));
                } else if ntype == 1 && descsz >= 16 {
                    let os = match e.u32(desc_at) {
                        0 => "Linux",
                        1 => "Hurd",
                        2 => "Solaris",
                        3 => "kFreeBSD",
                        _ => "unknown",
                    };
                    s.push_str(&format!(
                        ", for GNU/{os} {}.{}.{}",
                        e.u32(desc_at + 4),
                        e.u32(desc_at + 8),
                        e.u32(desc_at + 12)
                    ));
                }
            }
            q = next;
        }
    }
    if debug_info {
        s.push_str(", with debug_info");
    }
    s.push_str(if has_symtab {
        ", not stripped"
    } else {
        ", stripped"
    });
    let mime = match etype {
        1 => "application/x-object",
        2 => "application/x-executable",
        3 if pie => "application/x-pie-executable",
        3 => "application/x-sharedlib",
        4 => "application/x-coredump",
        _ => "application/octet-stream",
    };
    crate::file::elf_kind(s, mime)
}
