//! yq as kislyuk's yq works: each YAML document of the inputs becomes one JSON text, jq runs
//! over those with the rest of the command line, and `-y` turns jq's results back into YAML.

use std::ffi::OsString;
use std::io::{self, Read, Write};

/// jq 1.6's options that take parameters, and how many (main.c's grammar).
fn parameters(opt: &str) -> usize {
    match opt {
        "--indent" | "-L" => 1,
        "--arg" | "--argjson" | "--argfile" | "--rawfile" | "--slurpfile" => 2,
        _ => 0,
    }
}

/// jq's test for an option: a dash, then a dash or a letter.
fn optish(a: &str) -> bool {
    let b = a.as_bytes();
    b.len() > 1 && b[0] == b'-' && (b[1] == b'-' || b[1].is_ascii_alphabetic())
}

pub fn run(args: Vec<OsString>) -> i32 {
    let mut yaml_out = false;
    let mut jq_args: Vec<OsString> = Vec::new();
    // Positions in jq_args of the input files, which become JSON files.
    let mut inputs: Vec<usize> = Vec::new();
    let (mut program, mut positional, mut done) = (false, false, false);
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].clone();
        i += 1;
        let text = arg.to_string_lossy().into_owned();
        if done || !optish(&text) {
            if text == "--" && !done {
                done = true;
                jq_args.push(arg);
                continue;
            }
            if !program {
                program = true;
            } else if !positional {
                inputs.push(jq_args.len());
            }
            jq_args.push(arg);
            continue;
        }
        match text.as_str() {
            "-y" | "--yaml-output" | "-Y" | "--yaml-roundtrip" => {
                yaml_out = true;
                continue;
            }
            "--args" | "--jsonargs" => positional = true,
            _ => {}
        }
        if !text.starts_with("--") && text[1..].contains(['y', 'Y']) && text.len() > 2 {
            // A cluster such as -yc: yq's own letter out, jq's letters on.
            yaml_out = true;
            let rest: String = text[1..].chars().filter(|c| !"yY".contains(*c)).collect();
            jq_args.push(format!("-{rest}").into());
            continue;
        }
        jq_args.push(arg);
        let n = if text.starts_with("-L") && text.len() > 2 {
            0
        } else {
            parameters(&text)
        };
        for _ in 0..n {
            if i < args.len() {
                jq_args.push(args[i].clone());
                i += 1;
            }
        }
    }

    // The converted inputs live until jq has read them.
    let mut converted = Vec::new();
    if inputs.is_empty() {
        let mut data = Vec::new();
        if let Err(e) = io::stdin().read_to_end(&mut data) {
            eprintln!(
                "yq: error: reading standard input: {}",
                guest_rt::errno_text(&e)
            );
            return 2;
        }
        match to_json_file(&data, "<stdin>") {
            Ok(f) => {
                jq_args.push(f.0.clone().into());
                converted.push(f);
            }
            Err(code) => return code,
        }
    } else {
        for &at in &inputs {
            let name = jq_args[at].to_string_lossy().into_owned();
            let data = if name == "-" {
                let mut d = Vec::new();
                io::stdin().read_to_end(&mut d).map(|_| d)
            } else {
                std::fs::read(&name)
            };
            let data = match data {
                Ok(d) => d,
                Err(e) => {
                    eprintln!(
                        "yq: error: argument files: can't open '{name}': {}",
                        guest_rt::errno_text(&e)
                    );
                    return 2;
                }
            };
            match to_json_file(&data, &name) {
                Ok(f) => {
                    jq_args[at] = f.0.clone().into();
                    converted.push(f);
                }
                Err(code) => return code,
            }
        }
    }

    if !yaml_out {
        return crate::ffi::jq(&jq_args);
    }
    let (code, results) = crate::ffi::jq_captured(&jq_args);
    let mut docs = Vec::new();
    let mut rest = &results[..];
    for v in serde_json::Deserializer::from_slice(&results).into_iter::<serde_json::Value>() {
        match v {
            Ok(v) => docs.push(v),
            Err(_) => break,
        }
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if docs.is_empty() {
        // Not JSON (-r's raw strings): passed through as jq wrote it.
        let _ = out.write_all(rest);
    } else {
        rest = &[];
        let _ = crate::yaml::write_yaml_stream(&mut out, &docs);
    }
    let _ = out.write_all(rest);
    let _ = out.flush();
    code
}

/// A YAML stream as a file of JSON texts, one per document.
fn to_json_file(data: &[u8], name: &str) -> Result<guest_rt::TempFile, i32> {
    use serde::Deserialize;
    let mut json = Vec::new();
    for doc in serde_yaml::Deserializer::from_slice(data) {
        match serde_json::Value::deserialize(doc) {
            Ok(v) => {
                let _ = serde_json::to_writer(&mut json, &v);
                json.push(b'\n');
            }
            Err(e) => {
                eprintln!("yq: Error running jq: {e} (while parsing '{name}').");
                return Err(1);
            }
        }
    }
    guest_rt::temp_file("yq", &json).map_err(|e| {
        eprintln!(
            "yq: error: cannot hold the converted input: {}",
            guest_rt::errno_text(&e)
        );
        2
    })
}
