//! OpenTelemetry traces (docs/service.md, "Traces"): a collector on loopback receives, over
//! OTLP/HTTP in protobuf, a span per request and one per run, the run's a child of the
//! request that created it, in the trace whose id the response's `X-Request-Id` gives.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode as AxumStatus, header};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use reqwest::StatusCode;

use super::common::*;

/// A minimal OTLP/HTTP collector: every span of every `POST /v1/traces`, decoded.
struct Collector {
    addr: std::net::SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    /// The `service.name` of every export.
    services: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let services = Arc::new(Mutex::new(Vec::new()));
        let (s2, n2) = (spans.clone(), services.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let (spans, services) = (s2.clone(), n2.clone());
                async move {
                    assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
                    let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    for rs in req.resource_spans {
                        for attr in rs.resource.iter().flat_map(|r| &r.attributes) {
                            if attr.key == "service.name"
                                && let Some(AnyValue::StringValue(s)) =
                                    attr.value.as_ref().and_then(|v| v.value.clone())
                            {
                                services.lock().unwrap().push(s);
                            }
                        }
                        for ss in rs.scope_spans {
                            spans.lock().unwrap().extend(ss.spans);
                        }
                    }
                    (
                        AxumStatus::OK,
                        [(header::CONTENT_TYPE, "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector {
            addr,
            spans,
            services,
        }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until a span satisfies `f` (the exporter sends in batches, from its own thread).
    async fn wait_for(&self, what: &str, f: impl Fn(&Span) -> bool) -> Span {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(s) = self.spans().into_iter().find(|s| f(s)) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no {what} among {:#?}",
                self.spans()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn hex(id: &[u8]) -> String {
    hex::encode(id)
}

fn attr(s: &Span, key: &str) -> Option<AnyValue> {
    s.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}

fn string(s: &Span, key: &str) -> Option<String> {
    match attr(s, key) {
        Some(AnyValue::StringValue(v)) => Some(v),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_runs_are_spans_of_one_trace_sent_over_otlp() {
    let collector = Collector::start().await;
    let endpoint = format!("http://{}", collector.addr);
    let srv = TestServer::with(|c| {
        c.otlp_endpoint = endpoint;
        c.otel_service_name = "sandbox-under-test".into();
    })
    .await;

    let resp = srv
        .client
        .post(srv.url("/runs"))
        .json(&TestServer::script("echo traced; exit 3"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let trace_id = resp.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(trace_id.len(), 32, "{trace_id}");
    assert!(trace_id.bytes().all(|b| b.is_ascii_hexdigit()));
    let run: serde_json::Value = resp.json().await.unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let st = srv.wait_done(&run_id).await;
    assert_eq!(st["phase"], "failed");

    // A caller's W3C `traceparent` makes the request span its child, in the caller's trace.
    let parent_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_span = "00f067aa0ba902b7";
    let resp = srv
        .client
        .get(srv.url("/runtimes"))
        .header("traceparent", format!("00-{parent_trace}-{parent_span}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], parent_trace);
    // A caller's `X-Request-Id` that is a trace id becomes the trace's.
    let chosen = "0af7651916cd43dd8448eb211c80319c";
    let resp = srv
        .client
        .get(srv.url("/runtimes"))
        .header("x-request-id", chosen)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], chosen);
    // The run's audit events carry the trace id too (they are written in the background).
    let t0 = std::time::Instant::now();
    loop {
        let (s, audit) = srv
            .get(&format!("/admin/audit?run_id={run_id}&limit=200"))
            .await;
        assert_eq!(s, StatusCode::OK, "{audit}");
        let created = audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "sandbox.run.created")
            .cloned();
        if let Some(e) = created {
            assert_eq!(e["trace_id"], trace_id.as_str(), "{e}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{audit}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A clean shutdown sends what is buffered.
    srv.stop().await;

    let request = collector
        .wait_for("POST /runs request span", |s| {
            hex(&s.trace_id) == trace_id && s.name == "POST /api/v1/sandbox/runs"
        })
        .await;
    assert_eq!(request.kind, 2, "server kind: {request:?}");
    assert!(request.parent_span_id.is_empty(), "{request:?}");
    assert_eq!(
        attr(&request, "http.response.status_code"),
        Some(AnyValue::IntValue(200))
    );
    let run_span = collector
        .wait_for("run span", |s| {
            string(s, "sandbox.run_id").as_deref() == Some(&run_id)
        })
        .await;
    assert_eq!(run_span.name, "run");
    assert_eq!(hex(&run_span.trace_id), trace_id);
    assert_eq!(
        run_span.parent_span_id, request.span_id,
        "the run's parent is the request"
    );
    assert_eq!(
        string(&run_span, "sandbox.outcome").as_deref(),
        Some("failed")
    );
    assert_eq!(
        string(&run_span, "sandbox.reason").as_deref(),
        Some("nonzero_exit")
    );
    assert_eq!(
        string(&run_span, "sandbox.base_image").as_deref(),
        Some("wasmsand/default")
    );
    assert_eq!(
        string(&run_span, "sandbox.spec_version").as_deref(),
        Some("1.0")
    );
    assert_eq!(
        attr(&run_span, "process.exit.code"),
        Some(AnyValue::IntValue(3))
    );
    let phases: Vec<String> = run_span
        .events
        .iter()
        .filter(|e| e.name == "phase")
        .flat_map(|e| &e.attributes)
        .filter_map(|a| match a.value.as_ref()?.value.clone()? {
            AnyValue::StringValue(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(phases, ["starting", "running"], "{run_span:?}");
    // The run span lasts from the run's creation to its end, after the request's.
    assert!(run_span.start_time_unix_nano >= request.start_time_unix_nano);
    assert!(run_span.end_time_unix_nano >= run_span.start_time_unix_nano);

    let child = collector
        .wait_for("traceparent's child", |s| hex(&s.trace_id) == parent_trace)
        .await;
    assert_eq!(hex(&child.parent_span_id), parent_span);
    assert_eq!(child.name, "GET /api/v1/sandbox/runtimes");
    let chosen_span = collector
        .wait_for("span of the chosen trace id", |s| {
            hex(&s.trace_id) == chosen
        })
        .await;
    assert!(chosen_span.parent_span_id.is_empty());
    assert!(
        collector
            .services
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == "sandbox-under-test")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_and_request_ids_stay_the_callers() {
    let srv = TestServer::start().await;
    let resp = srv
        .client
        .get(srv.url("/runtimes"))
        .header("x-request-id", "my-own-id.1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "my-own-id.1");
}
