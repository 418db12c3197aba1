//! OpenTelemetry traces (docs/service.md, "Traces"): a span per HTTP request and one per run,
//! the run's a child of the request that created it, sent over OTLP/HTTP (protobuf) to
//! `SANDBOX_OTLP_ENDPOINT`. Off when that key is empty.
//!
//! Each [`crate::App`] has a tracer provider of its own rather than the process-global one
//! (as with its metrics recorder): servers in one process export to their own collectors.
//! That is also why spans are made with the OpenTelemetry API here rather than bridged from
//! `tracing` (tracing-opentelemetry works through the process's one subscriber).

use std::cell::Cell;
use std::collections::HashMap;

use axum::http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanId, SpanKind, Status, TraceContextExt, TraceId, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider, Span,
};
use parking_lot::Mutex;

use crate::config::Config;
use crate::store::RunRecord;

/// The tracer of one app, and the spans of its runs still going.
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    runs: Mutex<HashMap<String, Span>>,
}

/// Where OTLP/HTTP traces go for a collector's base URL (`http://host:4318`), as the
/// OpenTelemetry exporter variables read it; a URL already ending in `/v1/traces` is kept.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

impl Tracing {
    /// The app's tracing, or `None` when it is off.
    pub fn new(config: &Config) -> Result<Option<Tracing>, String> {
        if config.otlp_endpoint.trim().is_empty() {
            return Ok(None);
        }
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(traces_url(&config.otlp_endpoint))
            .build()
            .map_err(|e| format!("SANDBOX_OTLP_ENDPOINT: {e}"))?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(config.otel_service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_id_generator(CallerTraceIds::default())
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("wasmsand-server");
        Ok(Some(Tracing {
            provider,
            tracer,
            runs: Mutex::new(HashMap::new()),
        }))
    }

    /// The span of a request: a child of the caller's `traceparent` when it sends a valid
    /// one, else a new trace, whose id is the caller's `X-Request-Id` when that is a trace
    /// id (32 hex digits) so that the caller's id and the trace's are one.
    pub fn request(&self, method: &str, path: &str, headers: &HeaderMap) -> Context {
        let parent = TraceContextPropagator::new().extract(&Headers(headers));
        let builder = self
            .tracer
            .span_builder(format!("{method} {}", route_of(path)))
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", method.to_string()),
                KeyValue::new("url.path", path.to_string()),
            ]);
        if !parent.span().span_context().is_valid()
            && let Some(id) = headers
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .filter(|v| v.len() == 32)
                .and_then(|v| TraceId::from_hex(v).ok())
                .filter(|id| *id != TraceId::INVALID)
        {
            NEXT_TRACE_ID.with(|n| n.set(Some(id)));
        }
        let span = builder.start_with_context(&self.tracer, &parent);
        // Not taken when the span had a parent: not left for the next request either.
        NEXT_TRACE_ID.with(|n| n.set(None));
        parent.with_span(span)
    }

    /// Ends a request's span with its status code.
    pub fn request_done(cx: &Context, status: u16) {
        let span = cx.span();
        span.set_attribute(KeyValue::new("http.response.status_code", status as i64));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
    }

    /// Starts the span of a run, a child of the current context (the request that created
    /// it, whose context the request's future carries).
    pub fn run_started(&self, r: &RunRecord) {
        let mut span = self
            .tracer
            .span_builder("run")
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("sandbox.run_id", r.id.clone()),
                KeyValue::new("sandbox.runtime", r.runtime.clone()),
                KeyValue::new("sandbox.base_image", r.base_image.clone()),
                KeyValue::new("sandbox.spec_version", r.spec_version.clone()),
            ])
            .start_with_context(&self.tracer, &Context::current());
        span.add_event(
            "phase",
            vec![KeyValue::new("phase", r.phase.as_str().to_string())],
        );
        self.runs.lock().insert(r.id.clone(), span);
    }

    /// A phase the run entered on its way.
    pub fn run_phase(&self, r: &RunRecord, phase: &'static str) {
        if let Some(span) = self.runs.lock().get_mut(&r.id) {
            span.add_event("phase", vec![KeyValue::new("phase", phase)]);
        }
    }

    /// Ends a run's span with how the run ended.
    pub fn run_finished(&self, r: &RunRecord, reason: &str) {
        let Some(mut span) = self.runs.lock().remove(&r.id) else {
            return;
        };
        let outcome = r.phase.as_str();
        span.set_attribute(KeyValue::new("sandbox.outcome", outcome));
        span.set_attribute(KeyValue::new("sandbox.reason", reason.to_string()));
        if let Some(code) = r.exit_code {
            span.set_attribute(KeyValue::new("process.exit.code", code as i64));
        }
        span.set_status(if outcome == "completed" {
            Status::Ok
        } else {
            Status::error(reason.to_string())
        });
        span.end();
    }

    /// Sends what is buffered and stops the exporter (a clean shutdown).
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(%e, "the trace exporter did not shut down cleanly");
        }
    }
}

/// The 32-hex-digit id of a context's trace.
pub fn trace_id(cx: &Context) -> String {
    cx.span().span_context().trace_id().to_string()
}

/// A path with its ids replaced by `{id}`, so that span names stay few: the route,
/// near enough, which the outer layer where the span starts does not know yet.
fn route_of(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            let digits = seg.bytes().filter(u8::is_ascii_digit).count();
            if seg.len() >= 12
                && digits > 0
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                "{id}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

thread_local! {
    /// The trace id the next root span made on this thread gets, if a caller chose it.
    static NEXT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Random ids, but a caller's trace id for the root span of its request: the SDK's span
/// builder has no other way to be given one.
#[derive(Debug, Default)]
struct CallerTraceIds(RandomIdGenerator);

impl IdGenerator for CallerTraceIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lose_their_ids_in_span_names() {
        assert_eq!(
            route_of("/api/v1/sandbox/runs/3f2c9a7e1b4d4c0e9f/stream"),
            "/api/v1/sandbox/runs/{id}/stream"
        );
        assert_eq!(
            route_of("/api/v1/sandbox/runtimes"),
            "/api/v1/sandbox/runtimes"
        );
        assert_eq!(route_of("/metrics"), "/metrics");
    }

    #[test]
    fn the_collector_url_gets_the_traces_path_once() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
