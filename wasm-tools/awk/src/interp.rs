//! The tree-walking evaluator: variables, records and fields, I/O redirections, builtins.

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::rc::Rc;

use crate::Host;
use crate::array::Array;
use crate::ast::*;
use crate::builtins::Builtin;
use crate::format;
use crate::io::{RecordReader, RsMode, errno_text};
use crate::regex::AwkRegex;
use crate::value::{Value, encode_into, looks_numeric, num_to_string};

/// awk-level function calls nest at most this deep; each costs several evaluator frames and
/// the sandbox's stack is small.
const MAX_CALL_DEPTH: usize = 1000;
/// Every evaluator and statement frame counts one unit; the sum bounds the Rust stack in use.
/// A bound for the wasm engine's own stack, which frame addresses do not show.
const MAX_UNITS: usize = 1600;
/// How much of the stack (measured from where the interpreter started) evaluation may use.
/// On wasm32 this is the 1 MiB shadow stack; unoptimized native builds have huge frames and
/// run on threads of at least 2 MiB.
const STACK_BUDGET: usize = if cfg!(all(debug_assertions, not(target_os = "wasi"))) {
    1536 << 10
} else {
    768 << 10
};

/// The current stack position, near enough: the address of a local.
#[inline(always)]
fn stack_pos() -> usize {
    let x = 0u8;
    std::hint::black_box(&x) as *const u8 as usize
}

pub enum Flow {
    Next,
    NextFile,
    Exit,
    Return(Value),
    Break,
    Continue,
    /// An error message (without the `awk: ` prefix and location).
    Fatal(String),
}

type R<T> = Result<T, Flow>;

fn fatal<T>(msg: impl Into<String>) -> R<T> {
    Err(Flow::Fatal(msg.into()))
}

#[derive(Debug, Clone)]
pub enum Cell {
    Val(Value),
    Arr(Rc<RefCell<Array>>),
}

enum Place {
    Global(usize),
    Local(usize),
    Field(usize),
    Elem(Rc<RefCell<Array>>, String),
}

#[derive(Clone)]
enum Splitter {
    Space,
    Char(char),
    Regex(Rc<AwkRegex>),
    Chars,
    Widths(Vec<usize>),
    Pattern(Rc<AwkRegex>),
}

enum OutStream {
    Stdout,
    Stderr,
    File(io::BufWriter<File>),
    Pipe(Vec<u8>),
}

struct InStream {
    reader: RecordReader,
    status: Option<i32>,
}

struct MainInput {
    argi: usize,
    reader: Option<RecordReader>,
    saw_file: bool,
    done: bool,
    in_file: bool,
}

pub struct Interp<'p, 'h> {
    prog: &'p Program,
    host: &'h mut dyn Host,
    pub globals: Vec<Cell>,
    locals: Vec<Cell>,
    frame: usize,
    depth: usize,
    units: usize,
    stack_base: usize,
    record: Rc<str>,
    fields: Vec<Value>,
    fields_valid: bool,
    nf: usize,
    nr: f64,
    fnr: f64,
    fs: String,
    ofs: String,
    ors: String,
    subsep: String,
    convfmt: String,
    ofmt: String,
    ignorecase: bool,
    splitter: Option<Splitter>,
    rs_mode: Option<RsMode>,
    lit_regex: Vec<Option<Rc<AwkRegex>>>,
    lit_regex_ic: Vec<Option<Rc<AwkRegex>>>,
    dyn_regex: HashMap<(String, bool), Rc<AwkRegex>>,
    stdout: Vec<u8>,
    outputs: Vec<(String, OutStream)>,
    inputs: HashMap<String, InStream>,
    main: MainInput,
    range_active: Vec<bool>,
    rand_seed: f64,
    rand_state: u64,
    pub exit_code: i32,
    line: u32,
    src: u16,
    pub src_names: Vec<String>,
    in_begin_end: bool,
    in_end: bool,
    /// Where stdout goes and stdin comes from when not the process's own (unit tests).
    pub capture: Option<Rc<RefCell<Vec<u8>>>>,
    pub stdin_data: Option<Vec<u8>>,
}

fn key_of_num(n: f64, convfmt: &str) -> String {
    num_to_string(n, convfmt)
}

impl<'p, 'h> Interp<'p, 'h> {
    pub fn new(prog: &'p Program, host: &'h mut dyn Host) -> Interp<'p, 'h> {
        let mut globals = vec![Cell::Val(Value::Uninit); prog.globals.len()];
        let s = |x: &str| Cell::Val(Value::Str(Rc::from(x)));
        globals[FS] = s(" ");
        globals[OFS] = s(" ");
        globals[ORS] = s("\n");
        globals[RS] = s("\n");
        globals[SUBSEP] = s("\x1c");
        globals[CONVFMT] = s("%.6g");
        globals[OFMT] = s("%.6g");
        globals[RSTART] = Cell::Val(Value::Num(0.0));
        globals[RLENGTH] = Cell::Val(Value::Num(-1.0));
        globals[FILENAME] = s("");
        globals[IGNORECASE] = Cell::Val(Value::Num(0.0));
        globals[RT] = s("");
        globals[ERRNO] = s("");
        globals[FIELDWIDTHS] = s("");
        globals[FPAT] = s("[^[:space:]]+");
        let mut env = Array::default();
        for (k, v) in std::env::vars_os() {
            let k = crate::value::decode(k.as_encoded_bytes());
            let v = crate::value::decode(v.as_encoded_bytes());
            env.set(&k, Value::strnum(&v));
        }
        globals[ENVIRON] = Cell::Arr(Rc::new(RefCell::new(env)));
        let mut pi = Array::default();
        pi.set("version", Value::strnum("5.2.1"));
        pi.set("FS", Value::strnum("FS"));
        // std::process::id() is unsupported (it panics) on WASI.
        #[cfg(not(target_os = "wasi"))]
        pi.set("pid", Value::Num(std::process::id() as f64));
        pi.set("platform", Value::strnum("posix"));
        globals[PROCINFO] = Cell::Arr(Rc::new(RefCell::new(pi)));
        globals[ARGV] = Cell::Arr(Rc::new(RefCell::new(Array::default())));
        Interp {
            prog,
            host,
            globals,
            locals: Vec::new(),
            frame: 0,
            depth: 0,
            units: 0,
            stack_base: stack_pos(),
            record: Rc::from(""),
            fields: Vec::new(),
            fields_valid: true,
            nf: 0,
            nr: 0.0,
            fnr: 0.0,
            fs: " ".into(),
            ofs: " ".into(),
            ors: "\n".into(),
            subsep: "\x1c".into(),
            convfmt: "%.6g".into(),
            ofmt: "%.6g".into(),
            ignorecase: false,
            splitter: None,
            rs_mode: None,
            lit_regex: vec![None; prog.regexes.len()],
            lit_regex_ic: vec![None; prog.regexes.len()],
            dyn_regex: HashMap::new(),
            stdout: Vec::with_capacity(1 << 16),
            outputs: Vec::new(),
            inputs: HashMap::new(),
            main: MainInput {
                argi: 1,
                reader: None,
                saw_file: false,
                done: false,
                in_file: false,
            },
            range_active: vec![false; prog.rules.len()],
            rand_seed: 0.0,
            rand_state: 0x2545F4914F6CDD1D,
            exit_code: 0,
            line: 0,
            src: 0,
            src_names: Vec::new(),
            in_begin_end: false,
            in_end: false,
            capture: None,
            stdin_data: None,
        }
    }

    // ---------- error reporting ----------

    /// The `awk: file:line: ` prefix, plus gawk's FILENAME/FNR note once input has been read.
    pub fn location(&self) -> String {
        let name = self
            .src_names
            .get(self.src as usize)
            .cloned()
            .unwrap_or_else(|| "cmd. line".into());
        let mut s = format!("awk: {}:{}: ", name, self.line);
        if self.nr > 0.0 || self.main.in_file {
            let fv = self.get_global_val(FILENAME);
            let f = self.str_of(&fv).into_owned();
            let f = if f.is_empty() { "-".to_string() } else { f };
            s.push_str(&format!("(FILENAME={} FNR={}) ", f, self.fnr));
        }
        s
    }

    // ---------- output ----------

    fn write_stdout(&mut self, bytes: &[u8]) {
        self.stdout.extend_from_slice(bytes);
        if self.stdout.len() >= 1 << 16 {
            self.flush_stdout();
        }
    }

    fn stdin_reader(&mut self) -> Box<dyn Read> {
        match &mut self.stdin_data {
            Some(d) => Box::new(io::Cursor::new(std::mem::take(d))),
            None => Box::new(io::stdin()),
        }
    }

    fn write_direct(&mut self, bytes: &[u8]) {
        match &self.capture {
            Some(c) => c.borrow_mut().extend_from_slice(bytes),
            None => {
                let mut o = io::stdout().lock();
                let _ = o.write_all(bytes);
                let _ = o.flush();
            }
        }
    }

    pub fn flush_stdout(&mut self) {
        if let Some(c) = &self.capture {
            c.borrow_mut().extend_from_slice(&self.stdout);
            self.stdout.clear();
            return;
        }
        if !self.stdout.is_empty() {
            let mut out = io::stdout().lock();
            let _ = out.write_all(&self.stdout);
            let _ = out.flush();
            self.stdout.clear();
        }
    }

    fn flush_all(&mut self) {
        self.flush_stdout();
        for (_, o) in &mut self.outputs {
            if let OutStream::File(f) = o {
                let _ = f.flush();
            }
        }
    }

    fn output_index(&mut self, name: &str, kind: RedirKind) -> R<usize> {
        if let Some(i) = self.outputs.iter().position(|(n, _)| n == name) {
            return Ok(i);
        }
        let stream = match kind {
            RedirKind::Pipe => {
                self.flush_all();
                OutStream::Pipe(Vec::new())
            }
            _ => match name {
                "/dev/stdout" | "-" | "/dev/fd/1" => OutStream::Stdout,
                "/dev/stderr" | "/dev/fd/2" => OutStream::Stderr,
                _ => {
                    let r = if kind == RedirKind::Append {
                        OpenOptions::new().append(true).create(true).open(name)
                    } else {
                        File::create(name)
                    };
                    match r {
                        Ok(f) => OutStream::File(io::BufWriter::new(f)),
                        Err(e) => {
                            return fatal(format!(
                                "cannot redirect to `{}': {}",
                                name,
                                errno_text(&e)
                            ));
                        }
                    }
                }
            },
        };
        self.outputs.push((name.to_string(), stream));
        Ok(self.outputs.len() - 1)
    }

    fn write_to(&mut self, redir: Option<&Redirect>, text: &str) -> R<()> {
        let Some(r) = redir else {
            if !text.as_bytes().contains(&0xF4) {
                self.write_stdout(text.as_bytes());
            } else {
                let mut v = Vec::new();
                encode_into(text, &mut v);
                self.write_stdout(&v);
            }
            return Ok(());
        };
        let name = self.eval_str(&r.target)?;
        let i = self.output_index(&name, r.kind)?;
        let mut bytes = Vec::with_capacity(text.len());
        encode_into(text, &mut bytes);
        match &mut self.outputs[i].1 {
            OutStream::Stdout => self.write_stdout(&bytes),
            OutStream::Stderr => {
                let _ = io::stderr().write_all(&bytes);
            }
            OutStream::File(f) => {
                if let Err(e) = f.write_all(&bytes) {
                    return fatal(format!("write failure: {}", errno_text(&e)));
                }
            }
            OutStream::Pipe(buf) => buf.extend_from_slice(&bytes),
        }
        Ok(())
    }

    /// Runs a collected output pipe's command; its output goes straight to stdout.
    fn finish_pipe(&mut self, cmd: &str, input: Vec<u8>) -> i32 {
        match self.host.run_captured(cmd, Some(&input)) {
            Ok((out, status)) => {
                self.write_direct(&out);
                status
            }
            Err(_) => -1,
        }
    }

    fn close_stream(&mut self, name: &str) -> f64 {
        if let Some(i) = self.outputs.iter().position(|(n, _)| n == name) {
            let (_, s) = self.outputs.remove(i);
            return match s {
                OutStream::File(mut f) => match f.flush() {
                    Ok(()) => 0.0,
                    Err(_) => -1.0,
                },
                OutStream::Pipe(buf) => {
                    self.flush_stdout();
                    self.finish_pipe(name, buf) as f64
                }
                OutStream::Stdout => {
                    self.flush_stdout();
                    0.0
                }
                OutStream::Stderr => 0.0,
            };
        }
        if let Some(s) = self.inputs.remove(name) {
            return s.status.unwrap_or(0) as f64;
        }
        self.set_global(
            ERRNO,
            Value::Str(Rc::from("close of redirection that was never opened")),
        )
        .ok();
        -1.0
    }

    /// At exit: files flushed, pipes run (their output ahead of awk's still-buffered output,
    /// as with gawk), then stdout flushed.
    pub fn close_all(&mut self) {
        let outs = std::mem::take(&mut self.outputs);
        for (name, s) in outs {
            match s {
                OutStream::File(mut f) => {
                    let _ = f.flush();
                }
                OutStream::Pipe(buf) => {
                    self.finish_pipe(&name, buf);
                }
                _ => {}
            }
        }
        self.flush_stdout();
    }

    // ---------- variables ----------

    fn get_global_val(&self, slot: usize) -> Value {
        match &self.globals[slot] {
            Cell::Val(v) => v.clone(),
            Cell::Arr(_) => Value::Uninit,
        }
    }

    fn var_name(&self, v: Var) -> String {
        match v {
            Var::Global(g) => self.prog.globals[g].clone(),
            Var::Local(_) => "parameter".into(),
        }
    }

    fn get_var(&mut self, v: Var) -> R<Value> {
        match v {
            Var::Global(g) => {
                if g < NUM_SPECIAL {
                    match g {
                        NF => {
                            self.ensure_fields();
                            return Ok(Value::Num(self.nf as f64));
                        }
                        NR => return Ok(Value::Num(self.nr)),
                        FNR => return Ok(Value::Num(self.fnr)),
                        _ => {}
                    }
                }
                match &self.globals[g] {
                    Cell::Val(v) => Ok(v.clone()),
                    Cell::Arr(_) => fatal(format!(
                        "attempt to use array `{}' in a scalar context",
                        self.prog.globals[g]
                    )),
                }
            }
            Var::Local(l) => match &self.locals[self.frame + l] {
                Cell::Val(v) => Ok(v.clone()),
                Cell::Arr(_) => fatal("attempt to use array in a scalar context"),
            },
        }
    }

    fn set_var(&mut self, v: Var, val: Value) -> R<()> {
        match v {
            Var::Global(g) => self.set_global(g, val),
            Var::Local(l) => {
                let c = &mut self.locals[self.frame + l];
                if let Cell::Arr(_) = c {
                    return fatal("attempt to use array in a scalar context");
                }
                *c = Cell::Val(val);
                Ok(())
            }
        }
    }

    fn set_global(&mut self, g: usize, val: Value) -> R<()> {
        if let Cell::Arr(_) = self.globals[g] {
            return fatal(format!(
                "attempt to use array `{}' in a scalar context",
                self.prog.globals[g]
            ));
        }
        if g < NUM_SPECIAL {
            match g {
                NF => {
                    let n = val.to_num();
                    if n < 0.0 {
                        return fatal("NF set to negative value");
                    }
                    self.set_nf(n as usize);
                    return Ok(());
                }
                NR => {
                    self.nr = val.to_num().trunc();
                    return Ok(());
                }
                FNR => {
                    self.fnr = val.to_num().trunc();
                    return Ok(());
                }
                FS => {
                    // The current record keeps the splitting it was read with.
                    self.ensure_fields();
                    self.fs = self.str_of(&val).into_owned();
                    self.splitter = None;
                    self.set_pi_fs("FS");
                }
                OFS => self.ofs = self.str_of(&val).into_owned(),
                ORS => self.ors = self.str_of(&val).into_owned(),
                SUBSEP => self.subsep = self.str_of(&val).into_owned(),
                CONVFMT => self.convfmt = self.str_of(&val).into_owned(),
                OFMT => self.ofmt = self.str_of(&val).into_owned(),
                RS => self.rs_mode = None,
                IGNORECASE => {
                    self.ignorecase = val.truthy();
                    self.splitter = None;
                    self.rs_mode = None;
                }
                FIELDWIDTHS => {
                    self.ensure_fields();
                    self.splitter = None;
                    self.set_pi_fs("FIELDWIDTHS");
                }
                FPAT => {
                    self.ensure_fields();
                    self.splitter = None;
                    self.set_pi_fs("FPAT");
                }
                _ => {}
            }
        }
        self.globals[g] = Cell::Val(val);
        Ok(())
    }

    fn set_pi_fs(&mut self, which: &str) {
        if let Cell::Arr(a) = &self.globals[PROCINFO] {
            a.borrow_mut().set("FS", Value::strnum(which));
        }
    }

    fn get_array(&mut self, v: Var) -> R<Rc<RefCell<Array>>> {
        let name = self.var_name(v);
        let cell = match v {
            Var::Global(g) => &mut self.globals[g],
            Var::Local(l) => &mut self.locals[self.frame + l],
        };
        match cell {
            Cell::Arr(a) => Ok(a.clone()),
            Cell::Val(Value::Uninit) => {
                if let Var::Global(g) = v
                    && g < NUM_SPECIAL
                    && !matches!(g, ENVIRON | ARGV | PROCINFO)
                {
                    return fatal(format!("attempt to use scalar `{name}' as an array"));
                }
                let a = Rc::new(RefCell::new(Array::default()));
                *cell = Cell::Arr(a.clone());
                Ok(a)
            }
            Cell::Val(_) => fatal(format!("attempt to use scalar `{name}' as an array")),
        }
    }

    fn subscript(&mut self, subs: &[Expr]) -> R<String> {
        if subs.len() == 1 {
            let v = self.eval(&subs[0])?;
            return Ok(self.key_str(&v));
        }
        let mut k = String::new();
        for (i, s) in subs.iter().enumerate() {
            if i > 0 {
                k.push_str(&self.subsep);
            }
            let v = self.eval(s)?;
            k.push_str(&self.key_str(&v));
        }
        Ok(k)
    }

    fn key_str(&self, v: &Value) -> String {
        match v {
            Value::Num(n) => key_of_num(*n, &self.convfmt),
            Value::Uninit => String::new(),
            Value::Str(s) | Value::StrNum(s) => s.to_string(),
        }
    }

    pub fn str_of<'a>(&self, v: &'a Value) -> Cow<'a, str> {
        match v {
            Value::Uninit => Cow::Borrowed(""),
            Value::Num(n) => Cow::Owned(num_to_string(*n, &self.convfmt)),
            Value::Str(s) | Value::StrNum(s) => Cow::Borrowed(s),
        }
    }

    fn out_str<'a>(&self, v: &'a Value) -> Cow<'a, str> {
        match v {
            Value::Num(n) => Cow::Owned(num_to_string(*n, &self.ofmt)),
            _ => self.str_of(v),
        }
    }

    fn eval_str(&mut self, e: &Expr) -> R<String> {
        let v = self.eval(e)?;
        Ok(self.str_of(&v).into_owned())
    }

    // ---------- records and fields ----------

    pub fn set_record(&mut self, s: String) {
        self.record = Rc::from(s);
        self.fields_valid = false;
    }

    fn ensure_fields(&mut self) {
        if !self.fields_valid {
            self.split_record();
        }
    }

    fn splitter(&mut self) -> R<Splitter> {
        if let Some(s) = &self.splitter {
            return Ok(s.clone());
        }
        let fw = self.str_of(&self.get_global_val(FIELDWIDTHS)).into_owned();
        let pi_fs = match &self.globals[PROCINFO] {
            Cell::Arr(a) => a
                .borrow()
                .get("FS")
                .map(|v| self.str_of(v).into_owned())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let paragraph = matches!(self.rs_mode()?, RsMode::Paragraph);
        let s = if pi_fs == "FIELDWIDTHS" && !fw.trim().is_empty() {
            Splitter::Widths(
                fw.split_whitespace()
                    .map(|w| w.split(':').next_back().unwrap_or("0").parse().unwrap_or(0))
                    .collect(),
            )
        } else if pi_fs == "FPAT" {
            let p = self.str_of(&self.get_global_val(FPAT)).into_owned();
            Splitter::Pattern(self.regex_for(&p)?)
        } else {
            let fs = self.fs.clone();
            if fs == " " {
                Splitter::Space
            } else if fs.is_empty() {
                Splitter::Chars
            } else if fs.chars().count() == 1 && fs != "\\" {
                let c = fs.chars().next().unwrap_or(' ');
                if paragraph {
                    let esc = if c == '\t' {
                        "\\t".to_string()
                    } else {
                        format!(
                            "[{}]",
                            if c == '^' {
                                "\\^".into()
                            } else {
                                c.to_string()
                            }
                        )
                    };
                    Splitter::Regex(self.regex_for(&format!("{esc}|\n"))?)
                } else if self.ignorecase && c.is_alphabetic() {
                    Splitter::Regex(self.regex_for(&format!("[{c}]"))?)
                } else {
                    Splitter::Char(c)
                }
            } else if paragraph {
                Splitter::Regex(self.regex_for(&format!("({fs})|\n"))?)
            } else {
                Splitter::Regex(self.regex_for(&fs)?)
            }
        };
        self.splitter = Some(s.clone());
        Ok(s)
    }

    fn split_record(&mut self) {
        let rec = self.record.clone();
        let sp = match self.splitter() {
            Ok(s) => s,
            Err(_) => Splitter::Space,
        };
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        split_with(
            &sp,
            &rec,
            &mut |f: &str| fields.push(Value::strnum(f)),
            None,
        );
        self.nf = fields.len();
        self.fields = fields;
        self.fields_valid = true;
    }

    fn rebuild_record(&mut self) {
        let mut s = String::new();
        for (i, f) in self.fields.iter().enumerate() {
            if i > 0 {
                s.push_str(&self.ofs);
            }
            s.push_str(&self.out_field_str(f));
        }
        self.record = Rc::from(s);
    }

    fn out_field_str<'a>(&self, v: &'a Value) -> Cow<'a, str> {
        self.str_of(v)
    }

    fn set_nf(&mut self, n: usize) {
        self.ensure_fields();
        self.fields.resize(n, Value::StrNum(Rc::from("")));
        self.nf = n;
        self.rebuild_record();
    }

    fn get_field(&mut self, i: usize) -> Value {
        if i == 0 {
            return Value::StrNum(self.record.clone());
        }
        self.ensure_fields();
        match self.fields.get(i - 1) {
            Some(v) => v.clone(),
            None => Value::StrNum(Rc::from("")),
        }
    }

    fn set_field(&mut self, i: usize, v: Value) -> R<()> {
        if i == 0 {
            let s = self.str_of(&v).into_owned();
            self.set_record(s);
            return Ok(());
        }
        self.ensure_fields();
        if i > self.fields.len() {
            self.fields.resize(i, Value::StrNum(Rc::from("")));
            self.nf = i;
        }
        // Numbers keep their value; the record text uses CONVFMT.
        self.fields[i - 1] = v;
        self.rebuild_record();
        Ok(())
    }

    fn field_index(&mut self, e: &Expr) -> R<usize> {
        let n = self.eval(e)?.to_num();
        if n < 0.0 {
            return fatal(format!(
                "attempt to access field {}",
                num_to_string(n.trunc(), "%.6g")
            ));
        }
        if n > 1e8 {
            return fatal("field index too large");
        }
        Ok(n as usize)
    }

    // ---------- regexes ----------

    fn regex_for(&mut self, src: &str) -> R<Rc<AwkRegex>> {
        let key = (src.to_string(), self.ignorecase);
        if let Some(r) = self.dyn_regex.get(&key) {
            return Ok(r.clone());
        }
        match AwkRegex::new(src, self.ignorecase) {
            Ok(r) => {
                let r = Rc::new(r);
                if self.dyn_regex.len() > 1000 {
                    self.dyn_regex.clear();
                }
                self.dyn_regex.insert(key, r.clone());
                Ok(r)
            }
            Err(e) => fatal(format!("{e}: /{src}/")),
        }
    }

    fn literal_regex(&mut self, i: usize) -> R<Rc<AwkRegex>> {
        let table = if self.ignorecase {
            &mut self.lit_regex_ic
        } else {
            &mut self.lit_regex
        };
        if let Some(r) = &table[i] {
            return Ok(r.clone());
        }
        let src = &self.prog.regexes[i];
        match AwkRegex::new(src, self.ignorecase) {
            Ok(r) => {
                let r = Rc::new(r);
                let table = if self.ignorecase {
                    &mut self.lit_regex_ic
                } else {
                    &mut self.lit_regex
                };
                table[i] = Some(r.clone());
                Ok(r)
            }
            Err(e) => fatal(format!("{e}: /{src}/")),
        }
    }

    /// The regex an argument stands for: a literal, or a string used as a dynamic regex.
    fn regex_arg(&mut self, e: &Expr) -> R<Rc<AwkRegex>> {
        match e {
            Expr::Regex(i) => self.literal_regex(*i),
            Expr::Group(inner) if matches!(**inner, Expr::Regex(_)) => self.regex_arg(inner),
            _ => {
                let s = self.eval_str(e)?;
                self.regex_for(&s)
            }
        }
    }

    fn rs_mode(&mut self) -> R<RsMode> {
        if let Some(m) = &self.rs_mode {
            return Ok(m.clone());
        }
        let rs = self.str_of(&self.get_global_val(RS)).into_owned();
        let m = if rs.is_empty() {
            RsMode::Paragraph
        } else if rs.len() == 1 && !(self.ignorecase && rs.as_bytes()[0].is_ascii_alphabetic()) {
            RsMode::Byte(rs.as_bytes()[0])
        } else if rs.chars().count() == 1 {
            let c = rs.chars().next().unwrap_or('\n');
            let mut esc = String::new();
            if "\\^$.[]|()*+?{}".contains(c) {
                esc.push('\\');
            }
            esc.push(c);
            RsMode::Regex(self.regex_for(&esc)?)
        } else {
            RsMode::Regex(self.regex_for(&rs)?)
        };
        self.rs_mode = Some(m.clone());
        Ok(m)
    }

    // ---------- comparisons ----------

    fn compare(&self, a: &Value, b: &Value) -> Ordering {
        if let (Some(x), Some(y)) = (a.numeric(), b.numeric()) {
            return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
        }
        let sa = self.str_of(a);
        let sb = self.str_of(b);
        if self.ignorecase {
            sa.to_lowercase().cmp(&sb.to_lowercase())
        } else {
            sa.as_bytes().cmp(sb.as_bytes())
        }
    }

    // ---------- evaluation ----------

    fn place(&mut self, e: &Expr) -> R<Place> {
        Ok(match e {
            Expr::Var(Var::Global(g)) => Place::Global(*g),
            Expr::Var(Var::Local(l)) => Place::Local(*l),
            Expr::Field(i) => Place::Field(self.field_index(i)?),
            Expr::Index(v, subs) => {
                let k = self.subscript(subs)?;
                let a = self.get_array(*v)?;
                Place::Elem(a, k)
            }
            Expr::Group(inner) => return self.place(inner),
            _ => return fatal("assignment to non-lvalue"),
        })
    }

    fn get_place(&mut self, p: &Place) -> R<Value> {
        match p {
            Place::Global(g) => self.get_var(Var::Global(*g)),
            Place::Local(l) => self.get_var(Var::Local(*l)),
            Place::Field(i) => Ok(self.get_field(*i)),
            Place::Elem(a, k) => Ok(a.borrow_mut().get_or_create(k).clone()),
        }
    }

    fn set_place(&mut self, p: &Place, v: Value) -> R<()> {
        match p {
            Place::Global(g) => self.set_global(*g, v),
            Place::Local(l) => self.set_var(Var::Local(*l), v),
            Place::Field(i) => self.set_field(*i, v),
            Place::Elem(a, k) => {
                a.borrow_mut().set(k, v);
                Ok(())
            }
        }
    }

    fn arith(&self, op: BinOp, a: f64, b: f64) -> R<f64> {
        Ok(match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => {
                if b == 0.0 {
                    return fatal("division by zero attempted");
                }
                a / b
            }
            BinOp::Mod => {
                if b == 0.0 {
                    return fatal("division by zero attempted in `%'");
                }
                a % b
            }
            BinOp::Pow => pow(a, b),
        })
    }

    pub fn eval(&mut self, e: &Expr) -> R<Value> {
        self.units += 1;
        if self.units > MAX_UNITS
            || (self.units & 7 == 0 && self.stack_base.abs_diff(stack_pos()) > STACK_BUDGET)
        {
            self.units -= 1;
            return self.too_deep();
        }
        let r = self.eval_inner(e);
        self.units -= 1;
        r
    }

    #[cold]
    fn too_deep<T>(&mut self) -> R<T> {
        fatal(format!(
            "function calls and expressions nested too deeply (at most {MAX_UNITS} levels, {} KiB of stack)",
            STACK_BUDGET >> 10
        ))
    }

    fn eval_inner(&mut self, e: &Expr) -> R<Value> {
        // Kept small: every arm that needs sizeable locals lives in its own function, so the
        // frame that recursion multiplies stays small (the sandbox stack is 1 MiB).
        match e {
            Expr::Num(n) => Ok(Value::Num(*n)),
            Expr::Str(s) => Ok(Value::Str(s.clone())),
            Expr::Var(v) => self.get_var(*v),
            Expr::Group(inner) => self.eval(inner),
            Expr::Field(i) => {
                let i = self.field_index(i)?;
                Ok(self.get_field(i))
            }
            Expr::Cond(c, a, b) => {
                if self.eval(c)?.truthy() {
                    self.eval(a)
                } else {
                    self.eval(b)
                }
            }
            Expr::And(a, b) => Ok(Value::Num(
                (self.eval(a)?.truthy() && self.eval(b)?.truthy()) as i32 as f64,
            )),
            Expr::Or(a, b) => Ok(Value::Num(
                (self.eval(a)?.truthy() || self.eval(b)?.truthy()) as i32 as f64,
            )),
            Expr::Not(a) => Ok(Value::Num(!self.eval(a)?.truthy() as i32 as f64)),
            Expr::Neg(a) => Ok(Value::Num(-self.eval(a)?.to_num())),
            Expr::Plus(a) => Ok(Value::Num(self.eval(a)?.to_num())),
            Expr::Bin(op, a, b) => {
                let x = self.eval(a)?.to_num();
                let y = self.eval(b)?.to_num();
                Ok(Value::Num(self.arith(*op, x, y)?))
            }
            Expr::Call(f, args, line) => self.call(*f, args, *line),
            Expr::Builtin(b, args) => self.builtin(*b, args),
            Expr::Getline(src, var) => self.getline(src, var.as_deref()),
            _ => self.eval_other(e),
        }
    }

    #[inline(never)]
    fn eval_other(&mut self, e: &Expr) -> R<Value> {
        Ok(match e {
            Expr::Regex(i) => {
                let r = self.literal_regex(*i)?;
                Value::Num(r.is_match(&self.record) as i32 as f64)
            }
            Expr::Index(v, subs) => {
                let k = self.subscript(subs)?;
                let a = self.get_array(*v)?;
                a.borrow_mut().get_or_create(&k).clone()
            }
            Expr::In(subs, v) => {
                let k = self.subscript(subs)?;
                let a = self.get_array(*v)?;
                let r = a.borrow().contains(&k);
                Value::Num(r as i32 as f64)
            }
            Expr::Assign(l, r) => {
                let p = self.place(l)?;
                let v = self.eval(r)?;
                self.set_place(&p, v.clone())?;
                v
            }
            Expr::AugAssign(op, l, r) => {
                let p = self.place(l)?;
                let rv = self.eval(r)?.to_num();
                let lv = self.get_place(&p)?.to_num();
                let n = self.arith(*op, lv, rv)?;
                self.set_place(&p, Value::Num(n))?;
                Value::Num(n)
            }
            Expr::Cmp(op, a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                let o = self.compare(&x, &y);
                let r = match op {
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                    CmpOp::Eq => o == Ordering::Equal,
                    CmpOp::Ne => o != Ordering::Equal,
                };
                Value::Num(r as i32 as f64)
            }
            Expr::Concat(parts) => {
                let mut s = String::new();
                for p in parts {
                    let v = self.eval(p)?;
                    s.push_str(&self.str_of(&v));
                }
                Value::from_string(s)
            }
            Expr::Match(neg, l, r) => {
                let s = self.eval(l)?;
                let s = self.str_of(&s).into_owned();
                let re = self.regex_arg(r)?;
                Value::Num((re.is_match(&s) != *neg) as i32 as f64)
            }
            Expr::PreIncr(d, l) => {
                let p = self.place(l)?;
                let n = self.get_place(&p)?.to_num() + d;
                self.set_place(&p, Value::Num(n))?;
                Value::Num(n)
            }
            Expr::PostIncr(d, l) => {
                let p = self.place(l)?;
                let n = self.get_place(&p)?.to_num();
                self.set_place(&p, Value::Num(n + d))?;
                Value::Num(n)
            }
            _ => return self.eval(e),
        })
    }

    #[inline(never)]
    fn call(&mut self, fi: usize, args: &[Expr], line: u32) -> R<Value> {
        let prog = self.prog;
        let f = &prog.funcs[fi];
        if !f.defined {
            self.line = line;
            return fatal(format!("function `{}' not defined", f.name));
        }
        let all_args = args;
        let args = &args[..args.len().min(f.nparams)];
        if self.depth >= MAX_CALL_DEPTH {
            return fatal(format!(
                "function `{}': call nesting too deep (limit {MAX_CALL_DEPTH})",
                f.name
            ));
        }
        let mut cells = Vec::with_capacity(f.nparams);
        for (k, a) in args.iter().enumerate() {
            let a = match a {
                Expr::Group(inner) if matches!(**inner, Expr::Var(_)) => inner,
                _ => a,
            };
            if let Expr::Var(v) = a {
                let is_special = matches!(v, Var::Global(g) if *g < NUM_SPECIAL && !matches!(*g, ENVIRON | ARGV | PROCINFO));
                if !is_special {
                    let cell = match v {
                        Var::Global(g) => &mut self.globals[*g],
                        Var::Local(l) => &mut self.locals[self.frame + l],
                    };
                    match cell {
                        Cell::Arr(a) => {
                            cells.push(Cell::Arr(a.clone()));
                            continue;
                        }
                        Cell::Val(Value::Uninit) if f.array_params[k] => {
                            let a = Rc::new(RefCell::new(Array::default()));
                            *cell = Cell::Arr(a.clone());
                            cells.push(Cell::Arr(a));
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            let v = self.eval(a)?;
            cells.push(Cell::Val(v));
        }
        if all_args.len() > f.nparams {
            // gawk evaluates the surplus arguments, warns, and carries on.
            for a in &all_args[f.nparams..] {
                self.eval(a)?;
            }
            let msg = format!(
                "function `{}' called with more arguments than declared",
                f.name
            );
            self.warn(&msg);
        }
        cells.resize(f.nparams, Cell::Val(Value::Uninit));
        let saved_frame = self.frame;
        let saved_line = (self.line, self.src);
        self.frame = self.locals.len();
        self.locals.extend(cells);
        self.depth += 1;
        let r = self.exec_block(&f.body);
        self.depth -= 1;
        self.locals.truncate(self.frame);
        self.frame = saved_frame;
        match r {
            Ok(()) => {
                (self.line, self.src) = saved_line;
                Ok(Value::Uninit)
            }
            Err(Flow::Return(v)) => {
                (self.line, self.src) = saved_line;
                Ok(v)
            }
            Err(e) => Err(e),
        }
    }

    // ---------- statements ----------

    pub fn exec_block(&mut self, b: &[Stmt]) -> R<()> {
        for s in b {
            self.exec(s)?;
        }
        Ok(())
    }

    fn exec(&mut self, s: &Stmt) -> R<()> {
        self.units += 1;
        if self.units > MAX_UNITS || self.stack_base.abs_diff(stack_pos()) > STACK_BUDGET {
            self.units -= 1;
            return self.too_deep();
        }
        let r = self.exec_inner(s);
        self.units -= 1;
        r
    }

    #[inline(never)]
    fn exec_inner(&mut self, s: &Stmt) -> R<()> {
        self.line = s.line;
        self.src = s.src;
        match &s.kind {
            StmtKind::Expr(e) => {
                self.eval(e)?;
            }
            StmtKind::Print(args, redir) => {
                let mut out = String::new();
                if args.is_empty() {
                    out.push_str(&self.record);
                } else {
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            out.push_str(&self.ofs);
                        }
                        let v = self.eval(a)?;
                        out.push_str(&self.out_str(&v));
                    }
                }
                out.push_str(&self.ors);
                self.write_to(redir.as_ref(), &out)?;
            }
            StmtKind::Printf(args, redir) => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a)?);
                }
                let fmt = self.str_of(&vals[0]).into_owned();
                let out = match format::sprintf(&fmt, &vals[1..], &self.convfmt) {
                    Ok(s) => s,
                    Err(e) => return Err(Flow::Fatal(e.msg)),
                };
                self.write_to(redir.as_ref(), &out)?;
            }
            StmtKind::If(c, t, e) => {
                if self.eval(c)?.truthy() {
                    self.exec(t)?;
                } else if let Some(e) = e {
                    self.exec(e)?;
                }
            }
            StmtKind::While(c, body) => {
                while self.eval(c)?.truthy() {
                    match self.exec(body) {
                        Ok(()) | Err(Flow::Continue) => {}
                        Err(Flow::Break) => break,
                        Err(e) => return Err(e),
                    }
                }
            }
            StmtKind::Do(body, c) => loop {
                match self.exec(body) {
                    Ok(()) | Err(Flow::Continue) => {}
                    Err(Flow::Break) => break,
                    Err(e) => return Err(e),
                }
                if !self.eval(c)?.truthy() {
                    break;
                }
            },
            StmtKind::For(init, cond, step, body) => {
                if let Some(i) = init {
                    self.exec(i)?;
                }
                loop {
                    if let Some(c) = cond
                        && !self.eval(c)?.truthy()
                    {
                        break;
                    }
                    match self.exec(body) {
                        Ok(()) | Err(Flow::Continue) => {}
                        Err(Flow::Break) => break,
                        Err(e) => return Err(e),
                    }
                    if let Some(st) = step {
                        self.exec(st)?;
                    }
                }
            }
            StmtKind::ForIn(var, arr, body) => {
                let a = self.get_array(*arr)?;
                let keys = self.sorted_keys(&a)?;
                for k in keys {
                    let p = self.place(var)?;
                    self.set_place(&p, Value::StrNum(k))?;
                    match self.exec(body) {
                        Ok(()) | Err(Flow::Continue) => {}
                        Err(Flow::Break) => break,
                        Err(e) => return Err(e),
                    }
                }
            }
            StmtKind::Block(b) => self.exec_block(b)?,
            StmtKind::Next => {
                if self.in_begin_end {
                    return fatal("`next' used in BEGIN or END action");
                }
                return Err(Flow::Next);
            }
            StmtKind::NextFile => return Err(Flow::NextFile),
            StmtKind::Exit(e) => {
                if let Some(e) = e {
                    self.exit_code = self.eval(e)?.to_num() as i32;
                }
                return Err(Flow::Exit);
            }
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.eval(e)?,
                    None => Value::Uninit,
                };
                return Err(Flow::Return(v));
            }
            StmtKind::Break => return Err(Flow::Break),
            StmtKind::Continue => return Err(Flow::Continue),
            StmtKind::Delete(v, subs) => {
                let a = self.get_array(*v)?;
                match subs {
                    None => a.borrow_mut().clear(),
                    Some(subs) => {
                        let k = self.subscript(subs)?;
                        a.borrow_mut().remove(&k);
                    }
                }
            }
            StmtKind::Switch(e, cases) => {
                let v = self.eval(e)?;
                let mut matched = None;
                for (i, (label, _)) in cases.iter().enumerate() {
                    let hit = match label {
                        CaseLabel::Default => false,
                        CaseLabel::Regex(r) => {
                            let re = self.literal_regex(*r)?;
                            re.is_match(&self.str_of(&v))
                        }
                        CaseLabel::Value(c) => {
                            let cv = self.eval(c)?;
                            match (&cv, v.numeric()) {
                                (Value::Num(x), Some(y)) => *x == y,
                                _ => self.str_of(&cv) == self.str_of(&v),
                            }
                        }
                    };
                    if hit {
                        matched = Some(i);
                        break;
                    }
                }
                if matched.is_none() {
                    matched = cases
                        .iter()
                        .position(|(l, _)| matches!(l, CaseLabel::Default));
                }
                if let Some(start) = matched {
                    for (_, body) in &cases[start..] {
                        match self.exec_block(body) {
                            Ok(()) => {}
                            Err(Flow::Break) => return Ok(()),
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn sorted_keys(&mut self, a: &Rc<RefCell<Array>>) -> R<Vec<Rc<str>>> {
        let how = match &self.globals[PROCINFO] {
            Cell::Arr(p) => p
                .borrow()
                .get("sorted_in")
                .map(|v| self.str_of(v).into_owned()),
            _ => None,
        };
        let Some(how) = how else {
            return Ok(a.borrow().keys());
        };
        let mut pairs = a.borrow().pairs();
        if !self.sort_pairs(&mut pairs, &how)? {
            return Ok(a.borrow().keys());
        }
        Ok(pairs.into_iter().map(|(k, _)| k).collect())
    }

    /// Orders (index, value) pairs by one of gawk's `@ind_str_asc`-style names or a user
    /// comparison function. Returns false when `how` names no ordering.
    fn sort_pairs(&mut self, pairs: &mut [(Rc<str>, Value)], how: &str) -> R<bool> {
        fn num_key(k: &str) -> f64 {
            crate::value::str_to_num(k)
        }
        let cmp_val = |a: &Value, b: &Value, by_num: bool| -> Ordering {
            // Numbers sort before strings; within a kind, numerically or textually.
            let an = a.numeric();
            let bn = b.numeric();
            if by_num {
                let x = an.unwrap_or_else(|| a.to_num());
                let y = bn.unwrap_or_else(|| b.to_num());
                return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
            }
            match (an, bn) {
                (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => {
                    let sa = match a {
                        Value::Str(s) | Value::StrNum(s) => s.to_string(),
                        _ => String::new(),
                    };
                    let sb = match b {
                        Value::Str(s) | Value::StrNum(s) => s.to_string(),
                        _ => String::new(),
                    };
                    sa.cmp(&sb)
                }
            }
        };
        match how {
            "@unsorted" => return Ok(false),
            "@ind_str_asc" => pairs.sort_by(|a, b| a.0.cmp(&b.0)),
            "@ind_str_desc" => pairs.sort_by(|a, b| b.0.cmp(&a.0)),
            "@ind_num_asc" => pairs.sort_by(|a, b| {
                num_key(&a.0)
                    .partial_cmp(&num_key(&b.0))
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            }),
            "@ind_num_desc" => pairs.sort_by(|a, b| {
                num_key(&b.0)
                    .partial_cmp(&num_key(&a.0))
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| b.0.cmp(&a.0))
            }),
            "@val_str_asc" | "@val_type_asc" => pairs.sort_by(|a, b| {
                let sa = self.str_of(&a.1).into_owned();
                let sb = self.str_of(&b.1).into_owned();
                if how == "@val_type_asc" {
                    cmp_val(&a.1, &b.1, false).then_with(|| a.0.cmp(&b.0))
                } else {
                    sa.cmp(&sb).then_with(|| a.0.cmp(&b.0))
                }
            }),
            "@val_str_desc" | "@val_type_desc" => pairs.sort_by(|a, b| {
                let sa = self.str_of(&a.1).into_owned();
                let sb = self.str_of(&b.1).into_owned();
                if how == "@val_type_desc" {
                    cmp_val(&b.1, &a.1, false).then_with(|| b.0.cmp(&a.0))
                } else {
                    sb.cmp(&sa).then_with(|| b.0.cmp(&a.0))
                }
            }),
            "@val_num_asc" => {
                pairs.sort_by(|a, b| cmp_val(&a.1, &b.1, true).then_with(|| a.0.cmp(&b.0)))
            }
            "@val_num_desc" => {
                pairs.sort_by(|a, b| cmp_val(&b.1, &a.1, true).then_with(|| b.0.cmp(&a.0)))
            }
            name => {
                let Some(fi) = self
                    .prog
                    .funcs
                    .iter()
                    .position(|f| f.name == name && f.defined)
                else {
                    return fatal(format!(
                        "`{name}' is invalid as a function name for PROCINFO[\"sorted_in\"]"
                    ));
                };
                // A user comparison function: insertion sort keeps errors propagating simply.
                let mut v: Vec<(Rc<str>, Value)> = pairs.to_vec();
                let mut err = None;
                let mut idx: Vec<usize> = (0..v.len()).collect();
                idx.sort_by(|&x, &y| {
                    if err.is_some() {
                        return Ordering::Equal;
                    }
                    let args = [
                        Expr::Str(v[x].0.clone()),
                        value_expr(&v[x].1),
                        Expr::Str(v[y].0.clone()),
                        value_expr(&v[y].1),
                    ];
                    match self.call(fi, &args, self.line) {
                        Ok(r) => r.to_num().partial_cmp(&0.0).unwrap_or(Ordering::Equal),
                        Err(e) => {
                            err = Some(e);
                            Ordering::Equal
                        }
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
                let sorted: Vec<_> = idx.into_iter().map(|i| v[i].clone()).collect();
                v = sorted;
                pairs.clone_from_slice(&v);
            }
        }
        Ok(true)
    }

    // ---------- input ----------

    fn open_main_next(&mut self) -> R<bool> {
        loop {
            let argc = self.get_global_val(ARGC).to_num() as usize;
            if self.main.argi >= argc {
                if !self.main.saw_file {
                    self.main.saw_file = true;
                    let rd = self.stdin_reader();
                    self.main.reader = Some(RecordReader::new(rd));
                    self.fnr = 0.0;
                    self.main.in_file = true;
                    self.run_beginfile()?;
                    return Ok(true);
                }
                return Ok(false);
            }
            let i = self.main.argi;
            self.main.argi += 1;
            let argv = self.get_array(Var::Global(ARGV))?;
            let arg = match argv.borrow().get(&i.to_string()) {
                Some(v) => self.str_of(v).into_owned(),
                None => continue,
            };
            if arg.is_empty() {
                continue;
            }
            if let Some((name, val)) = split_assignment(&arg) {
                self.assign_command_var(name, val)?;
                continue;
            }
            self.main.saw_file = true;
            let reader: Box<dyn Read> = if arg == "-" || arg == "/dev/stdin" {
                self.stdin_reader()
            } else {
                match File::open(&arg) {
                    Ok(f) => {
                        if f.metadata().is_ok_and(|m| m.is_dir()) {
                            eprintln_flush(
                                self,
                                &format!(
                                    "awk: warning: command line argument `{arg}' is a directory: skipped"
                                ),
                            );
                            continue;
                        }
                        Box::new(f)
                    }
                    Err(e) => {
                        return Err(Flow::Fatal(format!(
                            "\u{0}cannot open file `{}' for reading: {}",
                            arg,
                            errno_text(&e)
                        )));
                    }
                }
            };
            self.set_global(FILENAME, Value::Str(Rc::from(arg.as_str())))?;
            self.main.reader = Some(RecordReader::new(reader));
            self.fnr = 0.0;
            self.main.in_file = true;
            self.run_beginfile()?;
            return Ok(true);
        }
    }

    fn run_beginfile(&mut self) -> R<()> {
        let prog = self.prog;
        for b in &prog.beginfile {
            match self.exec_block(b) {
                Ok(()) => {}
                Err(Flow::NextFile) => {
                    self.main.reader = None;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn run_endfile(&mut self) -> R<()> {
        if !self.main.in_file {
            return Ok(());
        }
        self.main.in_file = false;
        let prog = self.prog;
        for b in &prog.endfile {
            self.exec_block(b)?;
        }
        Ok(())
    }

    pub fn assign_command_var(&mut self, name: &str, val: &str) -> R<()> {
        let v = Value::strnum(&crate::lexer::unescape(val));
        match self.prog.globals.iter().position(|g| g == name) {
            Some(g) => self.set_global(g, v),
            None => Ok(()),
        }
    }

    /// The next main-input record, moving through ARGV files as needed.
    pub fn next_main_record(&mut self) -> R<Option<String>> {
        if self.main.done {
            return Ok(None);
        }
        loop {
            if self.main.reader.is_none() {
                if !self.open_main_next()? {
                    self.main.done = true;
                    return Ok(None);
                }
                if self.main.reader.is_none() {
                    self.run_endfile()?;
                    continue;
                }
            }
            let mode = self.rs_mode()?;
            let r = match self.main.reader.as_mut() {
                Some(rd) => rd.read_record(&mode),
                None => Ok(None),
            };
            match r {
                Ok(Some((rec, rt))) => {
                    self.globals[RT] = Cell::Val(Value::Str(Rc::from(rt)));
                    self.nr += 1.0;
                    self.fnr += 1.0;
                    return Ok(Some(rec));
                }
                Ok(None) => {
                    self.main.reader = None;
                    self.run_endfile()?;
                }
                Err(e) => {
                    return fatal(format!("error reading input file: {}", errno_text(&e)));
                }
            }
        }
    }

    /// Skips the rest of the current file (nextfile).
    pub fn skip_file(&mut self) -> R<()> {
        if self.main.reader.take().is_some() {
            self.run_endfile()?;
        }
        Ok(())
    }

    #[inline(never)]
    fn getline(&mut self, src: &GetlineSrc, var: Option<&Expr>) -> R<Value> {
        let (rec, count_nr) = match src {
            GetlineSrc::Main => match self.next_main_record()? {
                Some(r) => (r, false),
                None => return Ok(Value::Num(0.0)),
            },
            GetlineSrc::File(f) => {
                let name = self.eval_str(f)?;
                if !self.inputs.contains_key(&name) {
                    let rd: Box<dyn Read> = if name == "-" || name == "/dev/stdin" {
                        self.stdin_reader()
                    } else {
                        match File::open(&name) {
                            Ok(f) => Box::new(f),
                            Err(e) => {
                                self.set_global(ERRNO, Value::Str(Rc::from(errno_text(&e))))?;
                                return Ok(Value::Num(-1.0));
                            }
                        }
                    };
                    self.inputs.insert(
                        name.clone(),
                        InStream {
                            reader: RecordReader::new(rd),
                            status: None,
                        },
                    );
                }
                match self.read_from(&name)? {
                    Some(r) => (r, false),
                    None => return Ok(Value::Num(0.0)),
                }
            }
            GetlineSrc::Cmd(c) => {
                let cmd = self.eval_str(c)?;
                if !self.inputs.contains_key(&cmd) {
                    self.flush_all();
                    let (out, status) = match self.host.run_captured(&cmd, None) {
                        Ok(r) => r,
                        Err(e) => {
                            self.set_global(ERRNO, Value::Str(Rc::from(errno_text(&e))))?;
                            return Ok(Value::Num(-1.0));
                        }
                    };
                    self.inputs.insert(
                        cmd.clone(),
                        InStream {
                            reader: RecordReader::new(Box::new(io::Cursor::new(out))),
                            status: Some(status),
                        },
                    );
                }
                match self.read_from(&cmd)? {
                    Some(r) => (r, true),
                    None => return Ok(Value::Num(0.0)),
                }
            }
        };
        let _ = count_nr;
        if let GetlineSrc::Main = src {
            // NR and FNR were advanced by next_main_record.
        }
        match var {
            Some(v) => {
                let p = self.place(v)?;
                self.set_place(&p, Value::strnum(&rec))?;
            }
            None => self.set_record(rec),
        }
        Ok(Value::Num(1.0))
    }

    fn read_from(&mut self, name: &str) -> R<Option<String>> {
        let mode = self.rs_mode()?;
        let Some(s) = self.inputs.get_mut(name) else {
            return Ok(None);
        };
        match s.reader.read_record(&mode) {
            Ok(Some((rec, rt))) => {
                self.globals[RT] = Cell::Val(Value::Str(Rc::from(rt)));
                Ok(Some(rec))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.set_global(ERRNO, Value::Str(Rc::from(errno_text(&e))))?;
                Ok(None)
            }
        }
    }

    // ---------- pattern/action driver ----------

    pub fn run_begin(&mut self) -> R<()> {
        let prog = self.prog;
        self.in_begin_end = true;
        for b in &prog.begin {
            self.exec_block(b)?;
        }
        self.in_begin_end = false;
        Ok(())
    }

    pub fn run_end(&mut self) -> R<()> {
        let prog = self.prog;
        self.in_begin_end = true;
        self.in_end = true;
        for b in &prog.end {
            self.exec_block(b)?;
        }
        Ok(())
    }

    pub fn needs_main_loop(&self) -> bool {
        !self.prog.rules.is_empty()
            || !self.prog.end.is_empty()
            || !self.prog.beginfile.is_empty()
            || !self.prog.endfile.is_empty()
    }

    /// Runs the rules over every record. Ends with Ok at end of input, or an exit/fatal.
    pub fn run_main(&mut self) -> R<()> {
        let prog = self.prog;
        'records: loop {
            let Some(rec) = self.next_main_record()? else {
                return Ok(());
            };
            self.set_record(rec);
            for (ri, rule) in prog.rules.iter().enumerate() {
                self.line = rule.line;
                self.src = rule.src;
                let hit = match &rule.pattern {
                    Pattern::All => true,
                    Pattern::Expr(e) => self.eval(e)?.truthy(),
                    Pattern::Range(a, b) => {
                        if self.range_active[ri] {
                            if self.eval(b)?.truthy() {
                                self.range_active[ri] = false;
                            }
                            true
                        } else if self.eval(a)?.truthy() {
                            if !self.eval(b)?.truthy() {
                                self.range_active[ri] = true;
                            }
                            true
                        } else {
                            false
                        }
                    }
                };
                if !hit {
                    continue;
                }
                let r = match &rule.action {
                    None => {
                        let mut out = String::with_capacity(self.record.len() + 1);
                        out.push_str(&self.record);
                        out.push_str(&self.ors);
                        self.write_to(None, &out)
                    }
                    Some(a) => self.exec_block(a),
                };
                match r {
                    Ok(()) => {}
                    Err(Flow::Next) => continue 'records,
                    Err(Flow::NextFile) => {
                        self.skip_file()?;
                        continue 'records;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    // ---------- builtins ----------

    #[inline(never)]
    fn builtin(&mut self, b: Builtin, args: &[Expr]) -> R<Value> {
        use Builtin::*;
        let num = |s: &mut Self, i: usize| -> R<f64> { Ok(s.eval(&args[i])?.to_num()) };
        Ok(match b {
            Length => {
                if args.is_empty() {
                    return Ok(Value::Num(char_len(&self.record) as f64));
                }
                if let Some(v) = bare_var(&args[0]) {
                    let cell = match v {
                        Var::Global(g) => &self.globals[g],
                        Var::Local(l) => &self.locals[self.frame + l],
                    };
                    if let Cell::Arr(a) = cell {
                        return Ok(Value::Num(a.borrow().len() as f64));
                    }
                }
                let s = self.eval_str(&args[0])?;
                Value::Num(char_len(&s) as f64)
            }
            Substr => {
                let s = self.eval_str(&args[0])?;
                let m = num(self, 1)?;
                let n = if args.len() > 2 {
                    Some(num(self, 2)?)
                } else {
                    None
                };
                Value::from_string(substr(&s, m, n))
            }
            Index => {
                let s = self.eval_str(&args[0])?;
                let t = self.eval_str(&args[1])?;
                let pos = if self.ignorecase {
                    s.to_lowercase().find(&t.to_lowercase())
                } else {
                    s.find(&t)
                };
                let r = match pos {
                    Some(p) => char_len(&s[..p.min(s.len())]) + 1,
                    None => 0,
                };
                Value::Num(r as f64)
            }
            Split | Patsplit => {
                let s = self.eval_str(&args[0])?;
                let arr_var = array_arg(&args[1])?;
                let a = self.get_array(arr_var)?;
                let sp = if b == Patsplit {
                    if args.len() > 2 {
                        Splitter::Pattern(self.regex_arg(&args[2])?)
                    } else {
                        let p = self.str_of(&self.get_global_val(FPAT)).into_owned();
                        Splitter::Pattern(self.regex_for(&p)?)
                    }
                } else if args.len() > 2 {
                    match &args[2] {
                        Expr::Regex(_) => Splitter::Regex(self.regex_arg(&args[2])?),
                        e => {
                            let fs = self.eval_str(e)?;
                            if fs == " " {
                                Splitter::Space
                            } else if fs.is_empty() {
                                Splitter::Chars
                            } else if fs.chars().count() == 1 && fs != "\\" && !self.ignorecase {
                                Splitter::Char(fs.chars().next().unwrap_or(' '))
                            } else {
                                Splitter::Regex(self.regex_for(&fs)?)
                            }
                        }
                    }
                } else {
                    match self.splitter()? {
                        Splitter::Widths(_) | Splitter::Pattern(_) => Splitter::Space,
                        s => s,
                    }
                };
                let mut parts: Vec<String> = Vec::new();
                let mut seps: Vec<String> = Vec::new();
                let want_seps = args.len() > 3;
                split_with(
                    &sp,
                    &s,
                    &mut |f: &str| parts.push(f.to_string()),
                    if want_seps { Some(&mut seps) } else { None },
                );
                let n = parts.len();
                {
                    let mut a = a.borrow_mut();
                    a.clear();
                    for (i, p) in parts.into_iter().enumerate() {
                        a.set(&(i + 1).to_string(), Value::strnum(&p));
                    }
                }
                if want_seps {
                    let sv = array_arg(&args[3])?;
                    let sa = self.get_array(sv)?;
                    let mut sa = sa.borrow_mut();
                    sa.clear();
                    let base = if matches!(sp, Splitter::Space) || b == Patsplit {
                        0
                    } else {
                        1
                    };
                    for (i, sep) in seps.into_iter().enumerate() {
                        sa.set(&(i + base).to_string(), Value::strnum(&sep));
                    }
                }
                Value::Num(n as f64)
            }
            Sub | Gsub => {
                let re = self.regex_arg(&args[0])?;
                let repl = self.eval_str(&args[1])?;
                let place = if args.len() > 2 {
                    match &args[2] {
                        e if is_place(e) => Some(self.place(e)?),
                        _ => None,
                    }
                } else {
                    Some(Place::Field(0))
                };
                let target = match &place {
                    Some(p) => self.get_place(p)?,
                    None => self.eval(&args[2])?,
                };
                let t = self.str_of(&target).into_owned();
                let (out, n) = substitute(&re, &t, &repl, b == Gsub);
                if n > 0
                    && let Some(p) = place
                {
                    self.set_place(&p, Value::from_string(out))?;
                }
                Value::Num(n as f64)
            }
            Gensub => {
                let re = self.regex_arg(&args[0])?;
                let repl = self.eval_str(&args[1])?;
                let how = self.eval(&args[2])?;
                let target = if args.len() > 3 {
                    self.eval_str(&args[3])?
                } else {
                    self.record.to_string()
                };
                let hs = self.str_of(&how).into_owned();
                let which = if hs.starts_with('g') || hs.starts_with('G') {
                    0
                } else {
                    let n = how.to_num();
                    if n < 1.0 { 1 } else { n as usize }
                };
                Value::from_string(gensub(&re, &target, &repl, which))
            }
            Match => {
                let s = self.eval_str(&args[0])?;
                let re = self.regex_arg(&args[1])?;
                let arr = if args.len() > 2 {
                    let v = array_arg(&args[2])?;
                    Some(self.get_array(v)?)
                } else {
                    None
                };
                let (start, len) = match re.find_at(&s, 0) {
                    Some((b0, e0)) => {
                        (char_len(&s[..b0]) as f64 + 1.0, char_len(&s[b0..e0]) as f64)
                    }
                    None => (0.0, -1.0),
                };
                if let Some(a) = arr {
                    let mut a = a.borrow_mut();
                    a.clear();
                    if start > 0.0
                        && let Some(caps) = re.captures_at(&s, 0)
                    {
                        for (g, c) in caps.iter().enumerate() {
                            if let Some((x, y)) = c {
                                a.set(&g.to_string(), Value::strnum(&s[*x..*y]));
                                let k = format!("{g}{}start", self.subsep);
                                a.set(&k, Value::Num(char_len(&s[..*x]) as f64 + 1.0));
                                let k = format!("{g}{}length", self.subsep);
                                a.set(&k, Value::Num(char_len(&s[*x..*y]) as f64));
                            }
                        }
                    }
                }
                self.globals[RSTART] = Cell::Val(Value::Num(start));
                self.globals[RLENGTH] = Cell::Val(Value::Num(len));
                Value::Num(start)
            }
            Sprintf => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a)?);
                }
                let fmt = self.str_of(&vals[0]).into_owned();
                match format::sprintf(&fmt, &vals[1..], &self.convfmt) {
                    Ok(s) => Value::from_string(s),
                    Err(e) => return Err(Flow::Fatal(e.msg)),
                }
            }
            Sin => Value::Num(num(self, 0)?.sin()),
            Cos => Value::Num(num(self, 0)?.cos()),
            Atan2 => {
                let y = num(self, 0)?;
                let x = num(self, 1)?;
                Value::Num(y.atan2(x))
            }
            Exp => Value::Num(num(self, 0)?.exp()),
            Log => {
                let x = num(self, 0)?;
                if x < 0.0 {
                    self.warn(&format!(
                        "log: received negative argument {}",
                        num_to_string(x, "%.6g")
                    ));
                    // glibc's log of a negative number is a NaN with the sign bit set.
                    Value::Num(-f64::NAN)
                } else {
                    Value::Num(x.ln())
                }
            }
            Sqrt => {
                let x = num(self, 0)?;
                if x < 0.0 {
                    self.warn(&format!(
                        "sqrt: called with negative argument {}",
                        num_to_string(x, "%.6g")
                    ));
                    Value::Num(-f64::NAN)
                } else {
                    Value::Num(x.sqrt())
                }
            }
            Int => Value::Num(num(self, 0)?.trunc()),
            Rand => Value::Num(self.next_rand()),
            Srand => {
                let prev = self.rand_seed;
                let seed = if args.is_empty() {
                    now_secs()
                } else {
                    num(self, 0)?.trunc()
                };
                self.rand_seed = seed;
                self.rand_state = (seed as i64 as u64) ^ 0x2545F4914F6CDD1D;
                Value::Num(prev)
            }
            Tolower => Value::from_string(map_case(&self.eval_str(&args[0])?, false)),
            Toupper => Value::from_string(map_case(&self.eval_str(&args[0])?, true)),
            System => {
                let cmd = self.eval_str(&args[0])?;
                self.flush_all();
                let st = self.host.run_inherit(&cmd).unwrap_or(-1);
                Value::Num(st as f64)
            }
            Close => {
                let name = self.eval_str(&args[0])?;
                Value::Num(self.close_stream(&name))
            }
            Fflush => {
                if args.is_empty() {
                    self.flush_all();
                    Value::Num(0.0)
                } else {
                    let name = self.eval_str(&args[0])?;
                    match self.outputs.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, OutStream::File(f))) => {
                            let _ = f.flush();
                            Value::Num(0.0)
                        }
                        Some((_, OutStream::Stdout)) => {
                            self.flush_stdout();
                            Value::Num(0.0)
                        }
                        Some(_) => Value::Num(0.0),
                        None if name == "/dev/stdout" => {
                            self.flush_stdout();
                            Value::Num(0.0)
                        }
                        None => Value::Num(-1.0),
                    }
                }
            }
            Systime => Value::Num(now_secs()),
            Strftime => {
                let fmt = if !args.is_empty() {
                    self.eval_str(&args[0])?
                } else {
                    "%a %b %e %H:%M:%S %Z %Y".to_string()
                };
                let t = if args.len() > 1 {
                    num(self, 1)?
                } else {
                    now_secs()
                };
                Value::from_string(crate::time::strftime(&fmt, t as i64))
            }
            Mktime => {
                let s = self.eval_str(&args[0])?;
                Value::Num(crate::time::mktime(&s))
            }
            And | Or | Xor => {
                let mut acc = to_bits(num(self, 0)?)?;
                for i in 1..args.len() {
                    let x = to_bits(num(self, i)?)?;
                    acc = match b {
                        And => acc & x,
                        Or => acc | x,
                        _ => acc ^ x,
                    };
                }
                Value::Num(acc as f64)
            }
            Lshift => {
                let x = to_bits(num(self, 0)?)?;
                let s = num(self, 1)? as u32;
                Value::Num(x.checked_shl(s).unwrap_or(0) as f64)
            }
            Rshift => {
                let x = to_bits(num(self, 0)?)?;
                let s = num(self, 1)? as u32;
                Value::Num(x.checked_shr(s).unwrap_or(0) as f64)
            }
            Compl => {
                let x = to_bits(num(self, 0)?)?;
                Value::Num((!x & ((1u64 << 53) - 1)) as f64)
            }
            Asort | Asorti => {
                let src_v = array_arg(&args[0])?;
                let src = self.get_array(src_v)?;
                let mut pairs = src.borrow().pairs();
                let how = if args.len() > 2 {
                    self.eval_str(&args[2])?
                } else if b == Asort {
                    "@val_type_asc".to_string()
                } else {
                    "@ind_str_asc".to_string()
                };
                self.sort_pairs(&mut pairs, &how)?;
                let dest = if args.len() > 1 {
                    let v = array_arg(&args[1])?;
                    self.get_array(v)?
                } else {
                    src.clone()
                };
                let n = pairs.len();
                let mut d = dest.borrow_mut();
                d.clear();
                for (i, (k, v)) in pairs.into_iter().enumerate() {
                    let key = (i + 1).to_string();
                    if b == Asort {
                        d.set(&key, v);
                    } else {
                        d.set(&key, Value::StrNum(k));
                    }
                }
                Value::Num(n as f64)
            }
            Isarray => {
                let r = match bare_var(&args[0]) {
                    Some(v) => {
                        let cell = match v {
                            Var::Global(g) => &self.globals[g],
                            Var::Local(l) => &self.locals[self.frame + l],
                        };
                        matches!(cell, Cell::Arr(_))
                    }
                    None => false,
                };
                Value::Num(r as i32 as f64)
            }
            Typeof => {
                if let Some(v) = bare_var(&args[0]) {
                    let cell = match v {
                        Var::Global(g) => &self.globals[g],
                        Var::Local(l) => &self.locals[self.frame + l],
                    };
                    if let Cell::Arr(_) = cell {
                        return Ok(Value::Str(Rc::from("array")));
                    }
                }
                if let Expr::Regex(_) = &args[0] {
                    return Ok(Value::Str(Rc::from("regexp")));
                }
                let v = self.eval(&args[0])?;
                let t = match v {
                    Value::Uninit => {
                        if bare_var(&args[0]).is_some() || matches!(args[0], Expr::Index(..)) {
                            "untyped"
                        } else {
                            "unassigned"
                        }
                    }
                    Value::Num(_) => "number",
                    Value::Str(_) => "string",
                    Value::StrNum(s) => {
                        if looks_numeric(&s).is_some() {
                            "strnum"
                        } else {
                            "string"
                        }
                    }
                };
                Value::Str(Rc::from(t))
            }
            Strtonum => {
                let v = self.eval(&args[0])?;
                match v {
                    Value::Num(n) => Value::Num(n),
                    _ => Value::Num(strtonum(&self.str_of(&v))),
                }
            }
        })
    }

    fn warn(&mut self, msg: &str) {
        let loc = self.location();
        self.flush_stdout();
        eprintln!("{loc}warning: {msg}");
    }

    fn next_rand(&mut self) -> f64 {
        // xorshift64*: quality is ample for awk's rand().
        let mut x = self.rand_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rand_state = x;
        let r = x.wrapping_mul(0x2545F4914F6CDD1D);
        (r >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn init_args(&mut self, argv0: &str, operands: &[String]) {
        let argv = match &self.globals[ARGV] {
            Cell::Arr(a) => a.clone(),
            _ => return,
        };
        let mut a = argv.borrow_mut();
        a.set("0", Value::strnum(argv0));
        for (i, o) in operands.iter().enumerate() {
            a.set(&(i + 1).to_string(), Value::strnum(o));
        }
        self.globals[ARGC] = Cell::Val(Value::Num((operands.len() + 1) as f64));
    }
}

fn eprintln_flush(i: &mut Interp, msg: &str) {
    i.flush_stdout();
    eprintln!("{msg}");
}

/// Case conversion goes through the C library's wide characters in gawk, which turns bytes
/// that are not valid UTF-8 into U+FFFD.
fn valid_text(s: &str) -> Cow<'_, str> {
    if !s.as_bytes().contains(&0xF4) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if ('\u{10FF80}'..='\u{10FFFF}').contains(&c) {
                    '\u{FFFD}'
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// Character-by-character case mapping like towupper/towlower: a character whose mapping is
/// more than one character (ß) stays as it is.
fn map_case(s: &str, upper: bool) -> String {
    let s = valid_text(s);
    if s.is_ascii() {
        return if upper {
            s.to_ascii_uppercase()
        } else {
            s.to_ascii_lowercase()
        };
    }
    s.chars()
        .map(|c| {
            let mut m: Vec<char> = if upper {
                c.to_uppercase().collect()
            } else {
                c.to_lowercase().collect()
            };
            if m.len() == 1 {
                m.pop().unwrap_or(c)
            } else {
                c
            }
        })
        .collect()
}

fn value_expr(v: &Value) -> Expr {
    match v {
        Value::Num(n) => Expr::Num(*n),
        Value::Uninit => Expr::Str(Rc::from("")),
        Value::Str(s) | Value::StrNum(s) => Expr::Str(s.clone()),
    }
}

fn is_place(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Field(_) | Expr::Index(..) => true,
        Expr::Group(i) => is_place(i),
        _ => false,
    }
}

fn bare_var(e: &Expr) -> Option<Var> {
    match e {
        Expr::Var(v) => Some(*v),
        Expr::Group(i) => bare_var(i),
        _ => None,
    }
}

fn array_arg(e: &Expr) -> R<Var> {
    match bare_var(e) {
        Some(v) => Ok(v),
        None => fatal("attempt to use a scalar value as array"),
    }
}

fn to_bits(n: f64) -> R<u64> {
    if n < 0.0 {
        return fatal(format!(
            "negative values are not allowed in bitwise operations: {}",
            num_to_string(n, "%.6g")
        ));
    }
    Ok(n.trunc() as u64)
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as f64)
        .unwrap_or(0.0)
}

fn pow(a: f64, b: f64) -> f64 {
    if b == b.trunc() && b.abs() < 1024.0 {
        // Repeated squaring keeps integer powers exact where powf may not be.
        let mut n = b.abs() as u64;
        let mut base = a;
        let mut r = 1.0;
        while n > 0 {
            if n & 1 == 1 {
                r *= base;
            }
            base *= base;
            n >>= 1;
        }
        return if b < 0.0 { 1.0 / r } else { r };
    }
    a.powf(b)
}

fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// Byte offset of the `n`th character (0-based), clamped to the end.
fn char_offset(s: &str, n: usize) -> usize {
    if s.is_ascii() {
        return n.min(s.len());
    }
    s.char_indices().nth(n).map(|(i, _)| i).unwrap_or(s.len())
}

fn substr(s: &str, m: f64, n: Option<f64>) -> String {
    let len = char_len(s) as f64;
    // gawk truncates both numbers, and a start before the string is taken as 1 without
    // shortening the length.
    let mut start = m.trunc();
    let count = match n {
        Some(n) => {
            if n.is_nan() {
                return String::new();
            }
            n.trunc()
        }
        None => f64::INFINITY,
    };
    if start.is_nan() || start < 1.0 {
        start = 1.0;
    }
    if count <= 0.0 || start > len {
        return String::new();
    }
    let end = (start - 1.0 + count).min(len);
    let b = char_offset(s, start as usize - 1);
    let e = char_offset(s, end as usize);
    s[b..e].to_string()
}

fn split_assignment(arg: &str) -> Option<(&str, &str)> {
    let eq = arg.find('=')?;
    let name = &arg[..eq];
    let mut cs = name.chars();
    let first = cs.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    if !cs.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some((name, &arg[eq + 1..]))
}

/// Splits `s` into fields; `seps`, when wanted, collects the separator texts.
fn split_with(sp: &Splitter, s: &str, push: &mut dyn FnMut(&str), seps: Option<&mut Vec<String>>) {
    let want = seps.is_some();
    let mut dummy = Vec::new();
    let seps = seps.unwrap_or(&mut dummy);
    match sp {
        Splitter::Space => {
            let b = s.as_bytes();
            let is_ws = |c: u8| c == b' ' || c == b'\t' || c == b'\n';
            let mut i = 0;
            let mut last_sep_start = 0;
            while i < b.len() && is_ws(b[i]) {
                i += 1;
            }
            if want {
                seps.push(s[..i].to_string());
            }
            while i < b.len() {
                let st = i;
                while i < b.len() && !is_ws(b[i]) {
                    i += 1;
                }
                push(&s[st..i]);
                last_sep_start = i;
                while i < b.len() && is_ws(b[i]) {
                    i += 1;
                }
                if want && i < b.len() {
                    seps.push(s[last_sep_start..i].to_string());
                }
            }
            if want && last_sep_start < b.len() && !seps.is_empty() {
                seps.push(s[last_sep_start..].to_string());
            }
        }
        Splitter::Char(c) => {
            if s.is_empty() {
                return;
            }
            for (n, part) in s.split(*c).enumerate() {
                if n > 0 && want {
                    seps.push(c.to_string());
                }
                push(part);
            }
        }
        Splitter::Chars => {
            for (i, ch) in s.char_indices() {
                push(&s[i..i + ch.len_utf8()]);
            }
        }
        Splitter::Regex(re) => {
            if s.is_empty() {
                return;
            }
            let mut start = 0;
            while let Some((b, e)) = find_nonempty(re, s, start) {
                push(&s[start..b]);
                if want {
                    seps.push(s[b..e].to_string());
                }
                start = e;
            }
            push(&s[start..]);
        }
        Splitter::Widths(ws) => {
            let mut off = 0;
            for &w in ws {
                if off >= s.len() {
                    break;
                }
                let b = char_offset(s, off);
                let rest = &s[b..];
                let e = char_offset(rest, w);
                push(&rest[..e]);
                off += w;
            }
        }
        Splitter::Pattern(re) => {
            let mut prev_end = 0;
            while let Some((b, e)) = find_nonempty(re, s, prev_end) {
                if want {
                    seps.push(s[prev_end..b].to_string());
                }
                push(&s[b..e]);
                prev_end = e;
            }
            if want {
                seps.push(s[prev_end..].to_string());
            }
        }
    }
}

/// The first non-empty match of `re` in `s` from `at` on: field separators and FPAT fields
/// are never empty, so an empty match moves one character on.
fn find_nonempty(re: &AwkRegex, s: &str, mut at: usize) -> Option<(usize, usize)> {
    while at <= s.len() {
        let (b, e) = re.find_at(s, at)?;
        if e > b {
            return Some((b, e));
        }
        at = b + s[b..].chars().next()?.len_utf8();
    }
    None
}

/// sub/gsub: `&` is the match, `\&` a literal `&`, `\\` a backslash.
fn substitute(re: &AwkRegex, s: &str, repl: &str, global: bool) -> (String, usize) {
    let rb = repl.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut n = 0;
    let mut at = 0;
    let mut last = 0;
    while at <= s.len() {
        let Some((b, e)) = re.find_at(s, at) else {
            break;
        };
        out.push_str(&s[last..b]);
        // Expand the replacement: in a run of backslashes before `&`, pairs stand for one
        // backslash and an odd one makes the `&` literal; other backslashes are literal.
        let mut i = 0;
        while i < rb.len() {
            let c = rb[i];
            if c == b'\\' {
                let st = i;
                while i < rb.len() && rb[i] == b'\\' {
                    i += 1;
                }
                let run = i - st;
                if i < rb.len() && rb[i] == b'&' {
                    out.extend(std::iter::repeat_n('\\', run / 2));
                    if run % 2 == 1 {
                        out.push('&');
                    } else {
                        out.push_str(&s[b..e]);
                    }
                    i += 1;
                } else {
                    out.extend(std::iter::repeat_n('\\', run));
                }
            } else if c == b'&' {
                out.push_str(&s[b..e]);
                i += 1;
            } else {
                let st = i;
                i += 1;
                while i < rb.len() && rb[i] != b'\\' && rb[i] != b'&' {
                    i += 1;
                }
                out.push_str(&repl[st..i]);
            }
        }
        n += 1;
        if e == b {
            // An empty match: keep the next character and move past it.
            match s[b..].chars().next() {
                Some(ch) => {
                    out.push(ch);
                    at = b + ch.len_utf8();
                    last = at;
                }
                None => {
                    last = s.len();
                    at = s.len() + 1;
                }
            }
        } else {
            last = e;
            at = e;
            // An empty match right after a non-empty one does not count.
            if global
                && let Some((b2, e2)) = re.find_at(s, at)
                && b2 == e2
                && b2 == at
            {
                match s[at..].chars().next() {
                    Some(ch) => {
                        out.push(ch);
                        at += ch.len_utf8();
                        last = at;
                    }
                    None => {
                        last = s.len();
                        at = s.len() + 1;
                    }
                }
            }
        }
        if !global {
            break;
        }
    }
    if last <= s.len() {
        out.push_str(&s[last..]);
    }
    (out, n)
}

/// gensub: `\0`/`&` the match, `\1`..`\9` groups; `which` 0 means every match.
fn gensub(re: &AwkRegex, s: &str, repl: &str, which: usize) -> String {
    let rc: Vec<char> = repl.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    let mut last = 0;
    let mut count = 0;
    let mut prev_nonempty_end: Option<usize> = None;
    while at <= s.len() {
        let Some(caps) = re.captures_at(s, at) else {
            break;
        };
        let (b, e) = caps[0].unwrap_or((at, at));
        if b == e && prev_nonempty_end == Some(b) {
            // Skip the empty match that directly follows a non-empty one.
            match s[b..].chars().next() {
                Some(ch) => {
                    at = b + ch.len_utf8();
                    continue;
                }
                None => break,
            }
        }
        count += 1;
        if which == 0 || count == which {
            out.push_str(&s[last..b]);
            let mut i = 0;
            while i < rc.len() {
                let c = rc[i];
                if c == '\\' && i + 1 < rc.len() {
                    let d = rc[i + 1];
                    if d == '&' {
                        out.push('&');
                    } else if d.is_ascii_digit() {
                        let g = d as usize - '0' as usize;
                        if let Some(Some((x, y))) = caps.get(g) {
                            out.push_str(&s[*x..*y]);
                        }
                    } else {
                        out.push(d);
                    }
                    i += 2;
                } else if c == '\\' {
                    // A trailing lone backslash: gawk emits it only when it is the whole
                    // replacement, and otherwise a NUL.
                    out.push(if rc.len() == 1 { '\\' } else { '\0' });
                    i += 1;
                } else if c == '&' {
                    out.push_str(&s[b..e]);
                    i += 1;
                } else {
                    out.push(c);
                    i += 1;
                }
            }
            last = e;
            if which != 0 {
                break;
            }
        }
        if e == b {
            match s[b..].chars().next() {
                Some(ch) => at = b + ch.len_utf8(),
                None => break,
            }
        } else {
            at = e;
            prev_nonempty_end = Some(e);
        }
    }
    out.push_str(&s[last.min(s.len())..]);
    out
}

fn strtonum(s: &str) -> f64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let d: String = h.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        u64::from_str_radix(&d, 16).map(|v| v as f64).unwrap_or(0.0)
    } else if t.starts_with('0') && t.len() > 1 && t[1..].starts_with(|c: char| c.is_ascii_digit())
    {
        let d: String = t.chars().take_while(|c| ('0'..='7').contains(c)).collect();
        u64::from_str_radix(&d, 8).map(|v| v as f64).unwrap_or(0.0)
    } else {
        crate::value::str_to_num(t)
    };
    if neg { -v } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substr_rules() {
        assert_eq!(substr("hello", 0.0, Some(2.0)), "he");
        assert_eq!(substr("hello", 1.5, Some(2.3)), "he");
        assert_eq!(substr("hello", 2.0, None), "ello");
        assert_eq!(substr("hello", 10.0, None), "");
        assert_eq!(substr("hello", 2.0, Some(-1.0)), "");
    }
}
