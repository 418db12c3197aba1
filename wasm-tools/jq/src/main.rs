//! jq built on the jaq crates (jaq-core interpreter, jaq-std library, jaq-json values), with
//! jq's command line: -r -j -c -n -s -e -S --tab --indent N --arg --argjson --args
//! --jsonargs --slurpfile --rawfile -R, `input`/`inputs`, `$ENV`, and jq's exit codes
//! (2 usage/system, 3 compile error, 5 runtime error, -e: 1 for false/null, 4 for no output).

#![forbid(unsafe_code)]

use jaq_core::data::{DataT, HasLut};
use jaq_core::load::{Arena, File as JqFile, Loader};
use jaq_core::{Compiler, Ctx, Lut, Vars, unwrap_valr};
use jaq_json::write::Pp;
use jaq_json::{Num, Rc, Val};
use jaq_std::input::{HasInputs, Inputs, RcIter};
use std::io::{self, Read, Write};

struct D;

#[derive(Clone)]
struct Data<'a> {
    lut: &'a Lut<D>,
    inputs: Inputs<'a, Val>,
}

impl DataT for D {
    type V<'a> = Val;
    type Data<'a> = Data<'a>;
}

impl<'a> HasLut<'a, D> for Data<'a> {
    fn lut(&self) -> &'a Lut<D> {
        self.lut
    }
}

impl<'a> HasInputs<'a, Val> for Data<'a> {
    fn inputs(&self) -> Inputs<'a, Val> {
        self.inputs
    }
}

struct Opts {
    raw: bool,
    join: bool,
    compact: bool,
    null_input: bool,
    slurp: bool,
    exit_status: bool,
    sort_keys: bool,
    indent: String,
    raw_input: bool,
    ascii: bool,
    /// Invoked as `yq`: inputs are YAML documents.
    yaml_in: bool,
    /// `yq -y`: results are written as YAML documents.
    yaml_out: bool,
}

fn usage(msg: &str) -> i32 {
    eprintln!(
        "jq: error: {msg}\nUse jq --help for help with command-line options,\nor see the jq manpage, or online docs  at https://jqlang.github.io/jq"
    );
    2
}

/// A filter that does not load, in jq's words: where it stopped, what it found and what it
/// wanted, never the loader's own structures.
fn load_error_lines(code: &str, e: jaq_core::load::Error<&str>) -> Vec<String> {
    use jaq_core::load::Error;
    let at = |rest: &str, expected: &str| {
        let offset = code.len().saturating_sub(rest.len());
        let line = code[..offset].matches('\n').count() + 1;
        let found: String = rest
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(20)
            .collect();
        let found = if found.is_empty() {
            "end of file".to_string()
        } else {
            found
        };
        format!(
            "jq: error: syntax error, unexpected {found}, expecting {expected} at <top-level>, \
             line {line}:\n{code}"
        )
    };
    match e {
        Error::Io(v) => v
            .into_iter()
            .map(|(path, msg)| format!("jq: error: {path}: {msg}"))
            .collect(),
        Error::Lex(v) => v
            .into_iter()
            .map(|(x, rest)| at(rest, x.as_str()))
            .collect(),
        Error::Parse(v) => v
            .into_iter()
            .map(|(x, rest)| at(rest, x.as_str()))
            .collect(),
    }
}

/// Definitions of jq 1.6's builtins that jaq does not have (`IN`, `INDEX`, `JOIN`,
/// `truncate_stream`) or has with other semantics (`nth` of several indexes).
const JQ_DEFS: &str = r#"
def IN(s): any(s == .; .);
def IN(src; s): any(src == s; .);
def INDEX(stream; key): reduce stream as $row ({}; .[$row | key | tostring] = $row);
def INDEX(key): INDEX(.[]; key);
def JOIN($index; key): [.[] | [., $index[key]]];
def JOIN($index; stream; key): stream | [., $index[key]];
def JOIN($index; stream; key; join): stream | [., $index[key]] | join;
def truncate_stream(stream): . as $depth | stream | select((.[0] | length) > $depth) | .[0] |= .[$depth:];
def nth($n; f): if $n < 0 then error("Out of bounds negative array index") else last(limit($n + 1; f)) end;
"#;

/// jq's parser refuses values nested deeper than this (jq 1.6's MAX_PARSING_DEPTH).
const MAX_PARSING_DEPTH: usize = 256;

/// Where `data` first nests deeper than jq allows, outside strings: the offset of the
/// top-level value it is in, and of the bracket that goes too deep.
fn too_deep(data: &[u8]) -> Option<(usize, usize)> {
    let (mut depth, mut start, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for (i, &b) in data.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
                if depth > MAX_PARSING_DEPTH {
                    return Some((start, i));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// jq's place of a parse error: the line (from 1) and the bytes read on it.
fn line_column(data: &[u8], offset: usize) -> (usize, usize) {
    let before = &data[..offset.min(data.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = before.len()
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1);
    (line, column)
}

/// A JSON input that cannot be read, in jq 1.6's shape: `parse error: MSG at line L, column C`.
fn parse_error(data: &[u8], jaq: &str) -> String {
    let parsed = jaq
        .strip_prefix("byte offset ")
        .and_then(|r| r.split_once(": "))
        .and_then(|(n, msg)| Some((n.parse::<usize>().ok()?, msg)));
    let Some((offset, msg)) = parsed else {
        return format!("parse error: {jaq}");
    };
    let at_end = data[offset.min(data.len())..]
        .iter()
        .all(u8::is_ascii_whitespace);
    let msg = if at_end {
        "Unfinished JSON term at EOF".to_string()
    } else {
        let mut m = msg.to_string();
        if let Some(c) = m.get(..1) {
            m.replace_range(..1, &c.to_uppercase());
        }
        m
    };
    let (line, column) = line_column(data, if at_end { data.len() } else { offset + 1 });
    format!("parse error: {msg} at line {line}, column {column}")
}

/// Reports an input that could not be read; jq 1.6 exits 2 for these, except for JSON
/// parse errors, which exit 4.
fn input_error(e: &str, name: &str) -> i32 {
    if e.starts_with("parse error: ") {
        eprintln!("{e}");
        4
    } else {
        eprintln!("jq: error (at {name}): {e}");
        2
    }
}

fn parse_json(text: &[u8]) -> Result<Val, String> {
    jaq_json::read::parse_single(text).map_err(|e| e.to_string())
}

fn main() {
    guest_rt::enter_pwd();
    std::process::exit(run());
}

fn run() -> i32 {
    let mut args: Vec<String> = std::env::args().collect();
    // `yq` is this binary under another name (or `jq.wasm yq ...`): kislyuk's yq, jq's
    // command line over YAML input.
    let mut yq = args
        .first()
        .is_some_and(|a| guest_rt::tool_name(a.as_ref()) == "yq");
    if !yq && args.get(1).is_some_and(|a| a == "yq") {
        yq = true;
        args.remove(1);
    }
    let args: Vec<String> = args.into_iter().skip(1).collect();
    let mut o = Opts {
        raw: false,
        join: false,
        compact: false,
        null_input: false,
        slurp: false,
        exit_status: false,
        sort_keys: false,
        indent: "  ".into(),
        raw_input: false,
        ascii: false,
        yaml_in: yq,
        yaml_out: false,
    };
    let mut filter: Option<String> = None;
    let mut files: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut values: Vec<Val> = Vec::new();
    let mut named: Vec<(Val, Val)> = Vec::new();
    let mut positional: Vec<Val> = Vec::new();
    let mut rest_mode: Option<bool> = None; // Some(false): --args, Some(true): --jsonargs
    let mut i = 0;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        let mut next = |n: usize| -> Option<Vec<String>> {
            if i + n > args.len() {
                return None;
            }
            let v = args[i..i + n].to_vec();
            i += n;
            Some(v)
        };
        if a.starts_with('-') && a.len() > 1 && (rest_mode.is_none() || a.starts_with("--")) {
            match a.as_str() {
                "-y" | "--yaml-output" | "-Y" | "--yaml-roundtrip" if yq => o.yaml_out = true,
                "-r" | "--raw-output" => o.raw = true,
                "-j" | "--join-output" => {
                    o.raw = true;
                    o.join = true;
                }
                "-a" | "--ascii-output" => o.ascii = true,
                "-c" | "--compact-output" => o.compact = true,
                "-n" | "--null-input" => o.null_input = true,
                "-s" | "--slurp" => o.slurp = true,
                "-e" | "--exit-status" => o.exit_status = true,
                "-S" | "--sort-keys" => o.sort_keys = true,
                "-R" | "--raw-input" => o.raw_input = true,
                "-M" | "--monochrome-output" | "-C" | "--color-output" | "--unbuffered" => {}
                "--tab" => o.indent = "\t".into(),
                "--indent" => match next(1).and_then(|v| v[0].parse::<usize>().ok()) {
                    Some(n) if n <= 7 => o.indent = " ".repeat(n),
                    _ => return usage("--indent takes a number between 0 and 7"),
                },
                "--arg" => match next(2) {
                    Some(v) => {
                        names.push(v[0].clone());
                        named.push((Val::from(v[0].clone()), Val::from(v[1].clone())));
                        values.push(Val::from(v[1].clone()));
                    }
                    None => return usage("--arg takes two parameters (e.g. --arg varname value)"),
                },
                "--argjson" => match next(2) {
                    Some(v) => match parse_json(v[1].as_bytes()) {
                        Ok(j) => {
                            names.push(v[0].clone());
                            named.push((Val::from(v[0].clone()), j.clone()));
                            values.push(j);
                        }
                        Err(_) => return usage("Invalid JSON text passed to --argjson"),
                    },
                    None => {
                        return usage(
                            "--argjson takes two parameters (e.g. --argjson varname text)",
                        );
                    }
                },
                "--slurpfile" | "--rawfile" => match next(2) {
                    Some(v) => {
                        let data = match std::fs::read(&v[1]) {
                            Ok(d) => d,
                            Err(e) => {
                                return usage(&format!("Could not open {}: {}", v[1], errno(&e)));
                            }
                        };
                        let val = if a == "--rawfile" {
                            Val::from(String::from_utf8_lossy(&data).into_owned())
                        } else {
                            match jaq_json::read::parse_many(&data).collect::<Result<Vec<_>, _>>() {
                                Ok(vs) => vs.into_iter().collect(),
                                Err(e) => return usage(&format!("{}: {e}", v[1])),
                            }
                        };
                        names.push(v[0].clone());
                        named.push((Val::from(v[0].clone()), val.clone()));
                        values.push(val);
                    }
                    None => return usage(&format!("{a} takes two parameters")),
                },
                "--args" => rest_mode = Some(false),
                "--jsonargs" => rest_mode = Some(true),
                "-h" | "--help" => {
                    println!("Usage: jq [OPTIONS] FILTER [FILES...]");
                    return 0;
                }
                "--version" => {
                    println!("jq-1.7.1 (jaq)");
                    return 0;
                }
                _ => {
                    // Clusters such as -rc.
                    if !a.starts_with("--") && a[1..].chars().all(|c| "rjacnseSRM".contains(c)) {
                        for c in a[1..].chars() {
                            match c {
                                'r' => o.raw = true,
                                'j' => {
                                    o.raw = true;
                                    o.join = true;
                                }
                                'a' => o.ascii = true,
                                'c' => o.compact = true,
                                'n' => o.null_input = true,
                                's' => o.slurp = true,
                                'e' => o.exit_status = true,
                                'S' => o.sort_keys = true,
                                'R' => o.raw_input = true,
                                _ => {}
                            }
                        }
                    } else {
                        return usage(&format!("Unknown option: {a}"));
                    }
                }
            }
            continue;
        }
        if filter.is_none() {
            filter = Some(a);
        } else if let Some(json) = rest_mode {
            if json {
                match parse_json(a.as_bytes()) {
                    Ok(v) => positional.push(v),
                    Err(_) => return usage("Invalid JSON text passed to --jsonargs"),
                }
            } else {
                positional.push(Val::from(a));
            }
        } else {
            files.push(a);
        }
    }
    let Some(filter) = filter else {
        return usage("no filter given");
    };

    // $ENV and $ARGS are globals like the --arg variables.
    let env: Val = Val::obj(
        std::env::vars()
            .map(|(k, v)| (Val::from(k), Val::from(v)))
            .collect(),
    );
    let args_val = Val::obj(
        [
            (
                Val::from("positional".to_string()),
                positional.into_iter().collect(),
            ),
            (
                Val::from("named".to_string()),
                Val::obj(named.into_iter().collect()),
            ),
        ]
        .into_iter()
        .collect(),
    );
    let mut var_names: Vec<String> = vec!["$ENV".into(), "$ARGS".into()];
    var_names.extend(names.iter().map(|n| format!("${n}")));
    let mut var_values = vec![env, args_val];
    var_values.extend(values);

    let code = if filter.trim().is_empty() {
        ".".to_string()
    } else {
        filter
    };
    let funs: Vec<_> = jaq_core::funs::<D>()
        .chain(jaq_std::funs::<D>())
        .chain(
            jaq_std::input::funs::<D>()
                .into_vec()
                .into_iter()
                .map(jaq_core::native::run::<D>),
        )
        .chain(jaq_json::funs::<D>())
        .collect();
    let mut defs: Vec<_> = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .collect();
    // jq's builtins that jaq lacks, or defines otherwise; and `builtins`, listing what this
    // jq has as jq does (NAME/ARITY, no internal `_` names).
    defs.extend(jaq_core::load::parse(JQ_DEFS, |p| p.defs()).unwrap_or_default());
    let mut names: Vec<String> = funs
        .iter()
        .map(|(n, args, _)| format!("{n}/{}", args.len()))
        .chain(defs.iter().map(|d| format!("{}/{}", d.name, d.args.len())))
        .filter(|n| !n.starts_with('_') && !n.starts_with('@'))
        .collect();
    names.sort();
    names.dedup();
    // Leaked: the definitions borrow it for the rest of this short-lived process.
    let builtins: &'static str = Box::leak(
        format!(
            "def builtins: {};",
            serde_json::to_string(&names).unwrap_or_else(|_| "[]".into())
        )
        .into_boxed_str(),
    );
    defs.extend(jaq_core::load::parse(builtins, |p| p.defs()).unwrap_or_default());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = match loader.load(
        &arena,
        JqFile {
            code: &code,
            path: (),
        },
    ) {
        Ok(m) => m,
        Err(errs) => {
            let mut count = 0;
            for (file, e) in errs {
                for line in load_error_lines(file.code, e) {
                    eprintln!("{line}");
                    count += 1;
                }
            }
            let plural = if count == 1 { "" } else { "s" };
            eprintln!("jq: {count} compile error{plural}");
            return 3;
        }
    };
    let compiled = Compiler::default()
        .with_funs(funs)
        .with_global_vars(var_names.iter().map(String::as_str))
        .compile(modules);
    let filter = match compiled {
        Ok(f) => f,
        Err(errs) => {
            let mut count = 0;
            for (file, undefined) in errs {
                for (name, what) in undefined {
                    // jq names a filter with its arity (`foo/0`); a variable's name has its `$`.
                    let shown = match what {
                        jaq_core::compile::Undefined::Filter(arity) => format!("{name}/{arity}"),
                        _ => name.to_string(),
                    };
                    // The name is a slice of the filter's text: its place there.
                    let offset = (name.as_ptr() as usize)
                        .checked_sub(file.code.as_ptr() as usize)
                        .filter(|o| *o <= file.code.len())
                        .unwrap_or(0);
                    let line = file.code[..offset].matches('\n').count() + 1;
                    eprintln!(
                        "jq: error: {shown} is not defined at <top-level>, line {line}:\n{}",
                        file.code
                    );
                    count += 1;
                }
            }
            let plural = if count == 1 { "" } else { "s" };
            eprintln!("jq: {count} compile error{plural}");
            return 3;
        }
    };

    // Read all input up front: inputs are small in this sandbox and it keeps errors simple.
    let mut raw_inputs: Vec<(String, Vec<u8>)> = Vec::new();
    if files.is_empty() {
        let mut buf = Vec::new();
        if let Err(e) = io::stdin().read_to_end(&mut buf) {
            eprintln!("jq: error: {}", errno(&e));
            return 2;
        }
        raw_inputs.push(("<stdin>".into(), buf));
    } else {
        for f in &files {
            match std::fs::read(f) {
                Ok(d) => raw_inputs.push((f.clone(), d)),
                Err(e) => {
                    eprintln!("jq: error: Could not open {f}: {}", errno(&e));
                    return 2;
                }
            }
        }
    }
    let mut parsed: Vec<Result<Val, String>> = Vec::new();
    if o.raw_input {
        let all: Vec<u8> = raw_inputs.iter().flat_map(|(_, d)| d.clone()).collect();
        let text = String::from_utf8_lossy(&all).into_owned();
        if o.slurp {
            parsed.push(Ok(Val::from(text)));
        } else {
            parsed.extend(text.lines().map(|l| Ok(Val::from(l.to_string()))));
        }
    } else {
        for (name, data) in &raw_inputs {
            if o.yaml_in {
                parsed.extend(yaml_docs(data, name));
                continue;
            }
            // jq skips a byte-order mark at the start of a file.
            let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
            // Too deep a value would run the parser out of the guest's stack: the values
            // before it are read, then jq 1.6's error for it.
            let (readable, too_deep) = match too_deep(data) {
                Some((start, at)) => (&data[..start], Some(at)),
                None => (data, None),
            };
            let mut failed = false;
            for v in jaq_json::read::parse_many(readable) {
                failed = v.is_err();
                parsed.push(v.map_err(|e| parse_error(readable, &e.to_string())));
                // The parser does not move past what it cannot read: it would yield the same
                // error forever. jq, too, stops at the first.
                if failed {
                    break;
                }
            }
            if let (false, Some(at)) = (failed, too_deep) {
                let (line, column) = line_column(data, at + 1);
                parsed.push(Err(format!(
                    "parse error: Exceeds depth limit for parsing at line {line}, column {column}"
                )));
            }
        }
        if o.slurp {
            let mut all = Vec::new();
            for v in parsed.drain(..) {
                match v {
                    Ok(v) => all.push(v),
                    Err(e) => {
                        return input_error(&e, &raw_inputs[0].0);
                    }
                }
            }
            parsed.push(Ok(all.into_iter().collect()));
        }
    }

    let pp = Pp {
        indent: if o.compact {
            None
        } else {
            Some(o.indent.clone())
        },
        sort_keys: o.sort_keys,
        // jq writes `"a": 1` when pretty-printing and `{"a":1}` with -c.
        sep_space: !o.compact,
        ..Pp::default()
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let inputs_iter = RcIter::new(parsed.into_iter());
    let inputs: Inputs<Val> = &inputs_iter;
    let data = Data {
        lut: &filter.lut,
        inputs,
    };
    let mut last: Option<Val> = None;
    let mut yaml_docs_out: Vec<serde_json::Value> = Vec::new();
    let mut code = 0;
    loop {
        let input = if o.null_input {
            if last.is_some() || code != 0 {
                break;
            }
            Val::Null
        } else {
            let next = {
                let mut it = inputs;
                it.next()
            };
            match next {
                None => break,
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    // jq's output is block-buffered into a pipe: its messages come first.
                    code = input_error(&e, raw_inputs.first().map_or("<stdin>", |r| &r.0));
                    break;
                }
            }
        };
        let ctx = Ctx::<D>::new(data.clone(), Vars::new(var_values.clone()));
        for r in filter.id.run((ctx, input)).map(unwrap_valr) {
            match r {
                Ok(v) => {
                    if o.yaml_out && !(o.raw && matches!(v, Val::TStr(_))) {
                        let mut buf = Vec::new();
                        let _ = jaq_json::write::write(&mut buf, &Pp::default(), 0, &v);
                        yaml_docs_out.push(serde_json::from_slice(&buf).unwrap_or_default());
                    } else if write_val(&mut out, &v, &o, &pp).is_err() {
                        return 0;
                    }
                    last = Some(v);
                }
                Err(e) => {
                    let _ = out.flush();
                    eprintln!(
                        "jq: error (at {}): {e}",
                        raw_inputs.first().map_or("<unknown>", |r| &r.0)
                    );
                    code = 5;
                }
            }
        }
        if o.null_input {
            if last.is_none() {
                last = Some(Val::Null);
                if o.exit_status {
                    last = None;
                }
            }
            break;
        }
    }
    if !yaml_docs_out.is_empty() && write_yaml_stream(&mut out, &yaml_docs_out).is_err() {
        return 0;
    }
    let _ = out.flush();
    if code != 0 {
        return code;
    }
    if o.exit_status {
        return match last {
            None => 4,
            Some(Val::Null) | Some(Val::Bool(false)) => 1,
            Some(_) => 0,
        };
    }
    0
}

/// The documents of a YAML stream as jaq values (by way of JSON text, which keeps key order).
fn yaml_docs(data: &[u8], name: &str) -> Vec<Result<Val, String>> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_slice(data) {
        let v = match serde_json::Value::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                out.push(Err(format!("{e} (while parsing '{name}')")));
                break;
            }
        };
        let text = serde_json::to_vec(&v).unwrap_or_default();
        out.push(parse_json(&text));
    }
    out
}

/// A scalar as PyYAML writes it plainly or quoted (serde_yaml's quoting rules agree for the
/// common cases).
fn yaml_scalar(v: &serde_json::Value) -> String {
    // jq prints integral floats as integers (3.0 is 3); yq's YAML keeps jq's numbers.
    if let serde_json::Value::Number(n) = v
        && let Some(f) = n.as_f64()
        && n.is_f64()
        && f.fract() == 0.0
        && f.abs() < 1e17
    {
        return format!("{}", f as i64);
    }
    serde_yaml::to_string(v)
        .unwrap_or_default()
        .trim_end_matches('\n')
        .to_string()
}

/// Block-style YAML as kislyuk's yq writes it with PyYAML: two-space indents, sequences
/// indented under their key, `{}`/`[]` for empty collections.
fn yaml_block(v: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                out.push_str(&pad);
                out.push_str(&yaml_scalar(&Value::String(k.clone())));
                out.push(':');
                match val {
                    Value::Object(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml_block(val, indent + 2, out);
                    }
                    Value::Array(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml_block(val, indent + 2, out);
                    }
                    _ => {
                        out.push(' ');
                        out.push_str(&yaml_inline(val));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Value::Object(c) if !c.is_empty() => {
                        let mut inner = String::new();
                        yaml_block(item, indent + 2, &mut inner);
                        out.push_str(inner.trim_start_matches(' '));
                    }
                    Value::Array(c) if !c.is_empty() => {
                        let mut inner = String::new();
                        yaml_block(item, indent + 2, &mut inner);
                        out.push_str(inner.trim_start_matches(' '));
                    }
                    _ => {
                        out.push_str(&yaml_inline(item));
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&yaml_inline(v));
            out.push('\n');
        }
    }
}

fn yaml_inline(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(_) => "{}".into(),
        serde_json::Value::Array(_) => "[]".into(),
        _ => yaml_scalar(v),
    }
}

/// `yq -y`: the results as one YAML stream, as PyYAML's dump_all writes it: `---` between
/// documents (`--- x` for a scalar), and `...` after a final plain scalar.
fn write_yaml_stream(out: &mut impl Write, docs: &[serde_json::Value]) -> io::Result<()> {
    let mut text = String::new();
    for (k, d) in docs.iter().enumerate() {
        let scalar = !matches!(d, serde_json::Value::Object(m) if !m.is_empty())
            && !matches!(d, serde_json::Value::Array(a) if !a.is_empty());
        let mut body = String::new();
        yaml_block(d, 0, &mut body);
        if k > 0 {
            text.push_str(if scalar { "--- " } else { "---\n" });
        }
        text.push_str(&body);
        if k + 1 == docs.len() && scalar {
            text.push_str("...\n");
        }
    }
    out.write_all(text.as_bytes())
}

/// jq 1.6's text of a number: every number is a double, written with its shortest digits,
/// in exponent form when the point would be more than 15 places past the digits or 4 before
/// them (`1e+17`, `1e-05`, `12345678901234568`, `0.0001`); NaN is `null`, and the infinities
/// are the largest doubles.
fn jq_number(x: f64) -> Val {
    if x.is_nan() {
        return Val::Null;
    }
    let x = x.clamp(f64::MIN, f64::MAX);
    // `{:e}` is the shortest text that reads back as `x`: `d[.ddd]e<exp>`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let point = exp.parse::<i32>().unwrap_or(0) + 1;
    let n = digits.len() as i32;
    let text = if point <= -4 || point > n + 15 {
        let e = point - 1;
        let (head, tail) = digits.split_at(1);
        let frac = if tail.is_empty() {
            String::new()
        } else {
            format!(".{tail}")
        };
        format!(
            "{sign}{head}{frac}e{}{:02}",
            if e < 0 { '-' } else { '+' },
            e.unsigned_abs()
        )
    } else if point <= 0 {
        format!(
            "{sign}0.{}{digits}",
            "0".repeat(point.unsigned_abs() as usize)
        )
    } else if point >= n {
        format!("{sign}{digits}{}", "0".repeat((point - n) as usize))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    };
    Val::Num(Num::Dec(Rc::new(text)))
}

/// `v` with its numbers as jq 1.6 writes them (jaq keeps integers exact, writes `5.0` for a
/// float and keeps a number's input text).
fn as_jq_writes(v: &Val) -> Val {
    // Integers past 2^53 are not all doubles (and `isize` is 32 bits on wasm32).
    const EXACT: i64 = 1 << 53;
    match v {
        Val::Num(Num::Int(i)) if (-EXACT..=EXACT).contains(&(*i as i64)) => v.clone(),
        Val::Num(Num::Int(i)) => jq_number(*i as f64),
        Val::Num(Num::Float(x)) => jq_number(*x),
        Val::Num(n @ (Num::BigInt(_) | Num::Dec(_))) => match n.to_string().parse::<f64>() {
            Ok(x) => jq_number(x),
            Err(_) => v.clone(),
        },
        Val::Arr(a) => Val::Arr(Rc::new(a.iter().map(as_jq_writes).collect())),
        Val::Obj(o) => Val::obj(
            o.iter()
                .map(|(k, v)| (k.clone(), as_jq_writes(v)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

fn write_val(out: &mut impl Write, v: &Val, o: &Opts, pp: &Pp) -> io::Result<()> {
    match v {
        Val::TStr(s) if o.raw => out.write_all(s)?,
        _ => {
            let mut buf = Vec::new();
            jaq_json::write::write(&mut buf, pp, 0, &as_jq_writes(v))?;
            if o.ascii {
                let s = String::from_utf8_lossy(&buf);
                for c in s.chars() {
                    if c.is_ascii() {
                        write!(out, "{c}")?;
                    } else {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            write!(out, "\\u{u:04x}")?;
                        }
                    }
                }
            } else {
                out.write_all(&buf)?;
            }
        }
    }
    if !o.join {
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn errno(e: &io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(x: f64) -> String {
        match jq_number(x) {
            Val::Num(Num::Dec(s)) => s.to_string(),
            other => format!("{other:?}"),
        }
    }

    /// Each against what Debian's jq 1.6 prints.
    #[test]
    fn deep_values_and_parse_errors_are_placed_as_jq_places_them() {
        let deep = format!("[1] \"[[\" {}", "[".repeat(300));
        assert_eq!(too_deep(deep.as_bytes()), Some((9, 9 + 256)));
        assert_eq!(too_deep(b"[[\"[[[[\"]]"), None);
        assert_eq!(line_column(b"{\n", 2), (2, 0));
        assert_eq!(
            parse_error(b"{\n", "byte offset 2: value expected"),
            "parse error: Unfinished JSON term at EOF at line 2, column 0"
        );
    }

    #[test]
    fn numbers_read_as_jq_writes_them() {
        for (x, want) in [
            (10.0, "10"),
            (2.5, "2.5"),
            (1e17, "1e+17"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000"),
            (12345678901234567.0, "12345678901234568"),
            (123456789012345678.0, "123456789012345680"),
            (1e23, "1e+23"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (1.5e-5, "1.5e-05"),
            (1.23e-5, "1.23e-05"),
            (12345.678, "12345.678"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (5e-324, "5e-324"),
            (-1e17, "-1e+17"),
            (-0.0, "-0"),
            (f64::INFINITY, "1.7976931348623157e+308"),
            (f64::NEG_INFINITY, "-1.7976931348623157e+308"),
        ] {
            assert_eq!(text(x), want, "{x}");
        }
        assert_eq!(jq_number(f64::NAN), Val::Null);
    }
}
