//! The OpenAPI document and the web panel as served: the document describes what the server
//! really answers (every key of real bodies is a property of their schema, and the other way
//! round), and the panel's files come with their types and a same-origin CSP.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::TestServer;

async fn document(t: &TestServer, path: &str) -> Value {
    let resp = t
        .client
        .get(format!("http://{}{path}", t.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    resp.json().await.unwrap()
}

/// The property names of a component schema.
fn properties(doc: &Value, schema: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][schema]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no schema {schema}"))
        .keys()
        .cloned()
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The schema a response of `method path` with `status` refers to.
fn response_schema(doc: &Value, path: &str, method: &str, status: u16) -> String {
    let r = &doc["paths"][path][method]["responses"][status.to_string()];
    let s = r["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{method} {path} {status} has no schema: {r}"));
    s.rsplit('/').next().unwrap().to_string()
}

#[tokio::test]
async fn the_document_matches_real_responses() {
    let t = TestServer::start().await;
    let doc = document(&t, "/openapi.json").await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, document(&t, "/api/v1/sandbox/openapi.json").await);
    let p = |s: &str| format!("/api/v1/sandbox{s}");

    let sid = t.session(json!({})).await;
    let (_, session) = t.get(&format!("/sessions/{sid}")).await;
    let schema = response_schema(&doc, &p("/sessions/{id}"), "get", 200);
    assert_eq!(keys(&session), properties(&doc, &schema));

    let mut body = TestServer::script("mkdir -p out; echo hi > out/a.txt");
    body["capture_patterns"] = json!(["out/**"]);
    let created = t.start_run(body).await;
    let schema = response_schema(&doc, &p("/runs"), "post", 200);
    // `estimated_start_time` is there for queued runs only, `stdin_limits` for interactive
    // ones.
    let mut want = properties(&doc, &schema);
    want.remove("estimated_start_time");
    want.remove("stdin_limits");
    assert_eq!(keys(&created), want);
    let id = created["run_id"].as_str().unwrap();
    let status = t.wait_done(id).await;
    let mut want = properties(&doc, &response_schema(&doc, &p("/runs/{id}"), "get", 200));
    want.remove("stdin_limits");
    assert_eq!(keys(&status), want);
    let mut body = TestServer::one_shot(&["cat"]);
    body["interactive"] = json!(true);
    body["stdin_idle_timeout_sec"] = json!(1);
    let created = t.start_run(body).await;
    assert_eq!(
        keys(&created["stdin_limits"]),
        properties(&doc, "StdinLimits")
    );
    assert_eq!(
        keys(&status["resource_usage"]),
        properties(&doc, "ResourceUsage")
    );
    let (_, arts) = t.get(&format!("/runs/{id}/artifacts")).await;
    assert_eq!(
        keys(&arts),
        properties(
            &doc,
            &response_schema(&doc, &p("/runs/{id}/artifacts"), "get", 200)
        )
    );
    assert_eq!(
        keys(&arts["artifacts"][0]),
        properties(&doc, "ArtifactItem")
    );

    let (s, runtimes) = t.get("/runtimes").await;
    assert_eq!(s, StatusCode::OK);
    // Every field the schema names is on some runtime's entry (`oci_runtime` is docker's;
    // `acceleration` is vm's once it started a machine, tests/e2e/service/vm.rs).
    let mut seen = keys(&runtimes["runtimes"][0]);
    seen.insert("acceleration".into());
    for rt in runtimes["runtimes"].as_array().unwrap() {
        assert!(keys(rt).is_subset(&properties(&doc, "RuntimeInfo")), "{rt}");
        seen.extend(keys(rt));
    }
    assert_eq!(seen, properties(&doc, "RuntimeInfo"));

    // Errors carry the envelope the document names.
    let (s, err) = t.get("/runs/nope").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(
        response_schema(&doc, &p("/runs/{id}"), "get", 404),
        "ErrorEnvelope"
    );
    assert_eq!(keys(&err), properties(&doc, "ErrorEnvelope"));
    assert_eq!(keys(&err["error"]), properties(&doc, "ErrorBody"));

    // The stream is documented as the upgrade it is.
    let stream = &doc["paths"][p("/runs/{id}/stream")]["get"]["responses"];
    assert!(stream["101"].is_object() && stream["426"].is_object());
}

#[tokio::test]
async fn the_panel_is_served_from_the_binary() {
    let t = TestServer::start().await;
    let get = |path: &'static str| {
        let c = t.client.clone();
        let url = format!("http://{}{path}", t.addr);
        async move { c.get(url).send().await.unwrap() }
    };
    let index = get("/").await;
    assert_eq!(index.status(), StatusCode::OK);
    assert_eq!(index.headers()["content-type"], "text/html; charset=utf-8");
    let csp = index.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    let html = index.text().await.unwrap();
    assert!(html.contains(r#"<script src="/panel/panel.js" defer>"#));
    // Nothing from elsewhere: no absolute URL in the page.
    assert!(!html.contains("http://") && !html.contains("https://"));

    let js = get("/panel/panel.js").await;
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(
        js.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(js.text().await.unwrap().contains("from_seq"));
    let css = get("/panel/panel.css").await;
    assert_eq!(css.headers()["content-type"], "text/css; charset=utf-8");

    // The deep link to a run (docs/service.md, "Web panel") is the same page.
    let link = get("/webui/sandbox/runs/some-run").await;
    assert_eq!(link.status(), StatusCode::OK);
    assert!(link.text().await.unwrap().contains("/panel/panel.js"));

    // Unknown files are the API's 404 envelope, not the page.
    let missing = get("/panel/nope.js").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let v: Value = missing.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found");
}
