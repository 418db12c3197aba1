//! The Kubernetes example of docs/deploy.md parses, its objects carry what the API server
//! requires, its references resolve (selectors, ports, secrets, claims), and every `SANDBOX_*`
//! variable it sets is one the server reads, with a value it accepts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;
use serde_yaml::Value;

fn docs() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/k8s");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML in {}", dir.display());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for d in serde_yaml::Deserializer::from_str(&text) {
            let v = Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if !v.is_null() {
                out.push((f.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
    }
    out
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    let mut cur = v;
    for p in path {
        cur = cur
            .get(*p)
            .unwrap_or_else(|| panic!("missing {} in {v:?}", path.join(".")));
    }
    cur
}

fn str_of<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    s(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    serde_yaml::from_value(v.clone()).unwrap()
}

#[test]
fn the_kubernetes_example_is_consistent() {
    let docs = docs();
    let api_version = |kind: &str| match kind {
        "Deployment" | "StatefulSet" => "apps/v1",
        "Service" | "Secret" | "PersistentVolumeClaim" => "v1",
        other => panic!("unexpected kind {other}"),
    };
    let mut by_kind: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for (file, d) in &docs {
        let kind = str_of(d, &["kind"]);
        assert_eq!(
            str_of(d, &["apiVersion"]),
            api_version(kind),
            "{file}: {kind}"
        );
        let name = str_of(d, &["metadata", "name"]);
        assert!(
            !name.is_empty()
                && name.len() <= 63
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{file}: bad name {name}"
        );
        by_kind.entry(kind.to_string()).or_default().push(d);
    }
    for k in [
        "Deployment",
        "StatefulSet",
        "Service",
        "Secret",
        "PersistentVolumeClaim",
    ] {
        assert!(by_kind.contains_key(k), "no {k}");
    }
    let named = |kind: &str, name: &str| -> &Value {
        by_kind[kind]
            .iter()
            .find(|d| str_of(d, &["metadata", "name"]) == name)
            .unwrap_or_else(|| panic!("no {kind} named {name}"))
    };

    let workloads: Vec<&Value> = by_kind["Deployment"]
        .iter()
        .chain(by_kind["StatefulSet"].iter())
        .copied()
        .collect();
    for w in &workloads {
        let sel = labels(s(w, &["spec", "selector", "matchLabels"]));
        let pod = labels(s(w, &["spec", "template", "metadata", "labels"]));
        assert!(
            sel.iter().all(|(k, v)| pod.get(k) == Some(v)),
            "the selector of {} does not match its pods",
            str_of(w, &["metadata", "name"])
        );
        if str_of(w, &["kind"]) == "StatefulSet" {
            named("Service", str_of(w, &["spec", "serviceName"]));
        }
        let spec = s(w, &["spec", "template", "spec"]);
        let volumes: BTreeSet<String> = spec
            .get("volumes")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .map(|v| {
                if let Some(claim) = v.get("persistentVolumeClaim") {
                    named("PersistentVolumeClaim", str_of(claim, &["claimName"]));
                }
                str_of(v, &["name"]).to_string()
            })
            .chain(
                w.get("spec")
                    .and_then(|s| s.get("volumeClaimTemplates"))
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten()
                    .map(|t| str_of(t, &["metadata", "name"]).to_string()),
            )
            .collect();
        for c in s(spec, &["containers"]).as_sequence().unwrap() {
            str_of(c, &["name"]);
            str_of(c, &["image"]);
            let ports: BTreeSet<String> = c
                .get("ports")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .map(|p| {
                    assert!(s(p, &["containerPort"]).as_u64().is_some());
                    str_of(p, &["name"]).to_string()
                })
                .collect();
            for m in c
                .get("volumeMounts")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
            {
                assert!(
                    volumes.contains(str_of(m, &["name"])),
                    "unknown volume in {m:?}"
                );
            }
            for probe in ["readinessProbe", "livenessProbe"] {
                if let Some(port) = c
                    .get(probe)
                    .and_then(|p| p.get("httpGet"))
                    .and_then(|h| h.get("port"))
                {
                    assert!(
                        ports.contains(port.as_str().unwrap()),
                        "{probe} port {port:?}"
                    );
                }
            }
            for e in c
                .get("envFrom")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
            {
                named("Secret", str_of(e, &["secretRef", "name"]));
            }
        }
    }

    // Every Service selects the pods of one workload, on a port those pods name.
    for svc in &by_kind["Service"] {
        let sel = labels(s(svc, &["spec", "selector"]));
        let target = workloads
            .iter()
            .find(|w| {
                let pod = labels(s(w, &["spec", "template", "metadata", "labels"]));
                sel.iter().all(|(k, v)| pod.get(k) == Some(v))
            })
            .unwrap_or_else(|| {
                panic!(
                    "Service {} selects no pods",
                    str_of(svc, &["metadata", "name"])
                )
            });
        let c = &s(target, &["spec", "template", "spec", "containers"])
            .as_sequence()
            .unwrap()[0];
        for p in s(svc, &["spec", "ports"]).as_sequence().unwrap() {
            let tp = str_of(p, &["targetPort"]);
            assert!(
                s(c, &["ports"])
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .any(|cp| str_of(cp, &["name"]) == tp),
                "targetPort {tp} is not a port of the pods"
            );
        }
    }

    // The server's configuration: the variables it reads, and whether the example's values
    // (secrets and pod fields replaced by plausible ones) make a valid configuration.
    let server = named("Deployment", "wasmsand");
    let c = &s(server, &["spec", "template", "spec", "containers"])
        .as_sequence()
        .unwrap()[0];
    let asked = std::sync::Mutex::new(BTreeSet::new());
    let _ = wasmsand_server::Config::from_lookup(|k| {
        asked.lock().unwrap().insert(k.to_string());
        None
    });
    let known = asked.into_inner().unwrap();
    let mut env = BTreeMap::new();
    for e in s(c, &["env"]).as_sequence().unwrap() {
        let name = str_of(e, &["name"]).to_string();
        let value = match (e.get("value"), e.get("valueFrom")) {
            (Some(v), None) => v
                .as_str()
                .expect("env values are strings")
                .replace("$(POD_IP)", "10.0.0.7"),
            (None, Some(from)) => {
                if let Some(r) = from.get("secretKeyRef") {
                    let secret = named("Secret", str_of(r, &["name"]));
                    str_of(secret, &["stringData", str_of(r, &["key"])]).to_string()
                } else {
                    str_of(from, &["fieldRef", "fieldPath"]);
                    "10.0.0.7".to_string()
                }
            }
            _ => panic!("env {name} has neither value nor valueFrom"),
        };
        if name.starts_with("SANDBOX_") {
            assert!(known.contains(&name), "the server does not read {name}");
        }
        env.insert(name, value);
    }
    let config = wasmsand_server::Config::from_lookup(|k| env.get(k).cloned())
        .unwrap_or_else(|e| panic!("the example's configuration is refused: {e}"));
    assert_eq!(config.store.mode(), "postgres");
    assert_eq!(
        config.advertise_url.as_deref(),
        Some("http://10.0.0.7:8787")
    );
    let args: Vec<&str> = s(c, &["args"])
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "serve");
    assert!(args.windows(2).any(|w| w == ["--listen", "0.0.0.0:8787"]));
}
