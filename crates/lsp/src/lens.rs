//! "Run in Sandbox" code lenses: which files are runnable and the command each runs, as argv
//! with the file's workspace-relative path (the sandbox's working directory is the workspace
//! root).

/// One lens: where it sits, what it says and the run it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lens {
    /// 0-based line the lens sits above.
    pub line: u32,
    /// Its title.
    pub title: String,
    /// The run's argv.
    pub command: Vec<String>,
    /// The runtime the file's language needs when the workspace default cannot run it
    /// (`None`: the default).
    pub image: Option<&'static str>,
}

fn lens(line: usize, title: &str, command: &[&str], image: Option<&'static str>) -> Lens {
    Lens {
        line: line as u32,
        title: title.to_string(),
        command: command.iter().map(|s| s.to_string()).collect(),
        image,
    }
}

/// The lenses of the file at workspace-relative `rel` with `text`.
pub fn lenses(rel: &str, text: &str) -> Vec<Lens> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let dir = rel.rsplit_once('/').map(|(d, _)| d).unwrap_or(".");
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let first = text.lines().next().unwrap_or("");
    let mut out = Vec::new();
    match ext {
        "py" => {
            let test = name.starts_with("test_") || name.ends_with("_test.py");
            if test {
                out.push(lens(
                    0,
                    "▶ Run tests in Sandbox",
                    &["python3", "-m", "unittest", "-v", rel],
                    None,
                ));
            } else {
                let line = line_of(text, |l| l.starts_with("if __name__ ==")).unwrap_or(0);
                out.push(lens(line, "▶ Run in Sandbox", &["python3", rel], None));
            }
        }
        "sh" | "bash" => out.push(lens(0, "▶ Run in Sandbox", &["bash", rel], None)),
        "js" | "mjs" | "cjs" => {
            if name.contains(".test.") || name.contains(".spec.") {
                out.push(lens(
                    0,
                    "▶ Run tests in Sandbox",
                    &["node", "--test", rel],
                    Some("node"),
                ));
            } else {
                out.push(lens(0, "▶ Run in Sandbox", &["node", rel], Some("node")));
            }
        }
        "go" => {
            if name.ends_with("_test.go") {
                let pkg = format!("./{dir}");
                out.push(lens(
                    0,
                    "▶ Run tests in Sandbox",
                    &["go", "test", "-v", if dir == "." { "." } else { &pkg }],
                    Some("golang"),
                ));
            } else if text.lines().any(|l| l.trim() == "package main")
                && let Some(line) = line_of(text, |l| l.starts_with("func main()"))
            {
                // The package, not the file: a main split over several files still builds.
                let pkg = format!("./{dir}");
                let target = if dir == "." { "." } else { &pkg };
                out.push(lens(
                    line,
                    "▶ Run in Sandbox",
                    &["go", "run", target],
                    Some("golang"),
                ));
            }
        }
        "java" => {
            if let Some(line) = line_of(text, |l| {
                l.contains("static void main(") && l.contains("public")
            }) {
                // Java 11+ runs a single source file directly.
                out.push(lens(
                    line,
                    "▶ Run in Sandbox",
                    &["java", rel],
                    Some("openjdk:17"),
                ));
            }
        }
        _ if name == "package.json" => out.extend(npm_scripts(text)),
        _ if first.starts_with("#!") && (first.contains("sh") || first.contains("python")) => {
            let interp = if first.contains("python") {
                "python3"
            } else {
                "bash"
            };
            out.push(lens(0, "▶ Run in Sandbox", &[interp, rel], None));
        }
        _ => {}
    }
    out
}

fn line_of(text: &str, pred: impl Fn(&str) -> bool) -> Option<usize> {
    text.lines().position(|l| pred(l.trim_start()))
}

/// One lens per `scripts` entry of a `package.json`, on the script's own line.
fn npm_scripts(text: &str) -> Vec<Lens> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let Some(scripts) = v["scripts"].as_object() else {
        return Vec::new();
    };
    let start = line_of(text, |l| l.starts_with("\"scripts\"")).unwrap_or(0);
    scripts
        .keys()
        .map(|name| {
            let key = format!("\"{name}\"");
            let line = text
                .lines()
                .enumerate()
                .skip(start)
                .find(|(_, l)| l.trim_start().starts_with(&key))
                .map(|(i, _)| i)
                .unwrap_or(start);
            lens(
                line,
                &format!("▶ npm run {name} in Sandbox"),
                &["npm", "run", name],
                Some("node"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(l: &Lens) -> Vec<&str> {
        l.command.iter().map(String::as_str).collect()
    }

    #[test]
    fn each_language_s_runnable_files() {
        let l = lenses(
            "app/main.py",
            "import x\n\nif __name__ == \"__main__\":\n    x.go()\n",
        );
        assert_eq!(
            (l[0].line, argv(&l[0])),
            (2, vec!["python3", "app/main.py"])
        );
        let l = lenses("tests/test_x.py", "import unittest\n");
        assert_eq!(argv(&l[0])[..3], ["python3", "-m", "unittest"]);
        let l = lenses("cmd/tool/main.go", "package main\n\nfunc main() {\n}\n");
        assert_eq!(
            (l[0].line, argv(&l[0])),
            (2, vec!["go", "run", "./cmd/tool"])
        );
        let l = lenses("main.go", "package main\n\nfunc main() {\n}\n");
        assert_eq!(argv(&l[0]), ["go", "run", "."]);
        assert!(lenses("lib/util.go", "package lib\nfunc main() {}\n").is_empty());
        let l = lenses("pkg/x_test.go", "package pkg\n");
        assert_eq!(argv(&l[0]), ["go", "test", "-v", "./pkg"]);
        let l = lenses(
            "src/Main.java",
            "class Main {\n  public static void main(String[] a) {}\n}\n",
        );
        assert_eq!((l[0].line, argv(&l[0])), (1, vec!["java", "src/Main.java"]));
        let l = lenses("bin/tool", "#!/usr/bin/env bash\necho hi\n");
        assert_eq!(argv(&l[0]), ["bash", "bin/tool"]);
        assert!(lenses("README.md", "# hi\n").is_empty());
        let l = lenses("a.test.js", "");
        assert_eq!(argv(&l[0]), ["node", "--test", "a.test.js"]);
    }

    #[test]
    fn package_json_scripts_sit_on_their_lines() {
        let text = "{\n  \"name\": \"x\",\n  \"scripts\": {\n    \"test\": \"node --test\",\n    \"start\": \"node .\"\n  }\n}\n";
        let l = lenses("package.json", text);
        let got: Vec<(u32, Vec<&str>)> = l.iter().map(|l| (l.line, argv(l))).collect();
        assert_eq!(
            got,
            vec![
                (4, vec!["npm", "run", "start"]),
                (3, vec!["npm", "run", "test"])
            ]
        );
        assert!(lenses("package.json", "{ not json").is_empty());
    }
}
