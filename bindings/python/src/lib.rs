//! `wasmsand._native`: the Rust side of the Python module.
//!
//! The in-process transport speaks the very JSON-RPC the `sandboxd` server speaks, to the
//! same [`Dispatcher`], just without a pipe in between: both transports then behave the same
//! by construction, and one Python layer maps results and errors for both. A request runs with
//! the GIL released; output notifications re-acquire it only to call the Python callback.

#![forbid(unsafe_code)]

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::Value;
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify};

/// One root sandbox and its forks, in this process.
#[pyclass(module = "wasmsand._native", frozen)]
struct NativeDispatcher {
    inner: Arc<Dispatcher>,
}

#[pymethods]
impl NativeDispatcher {
    #[new]
    fn new() -> Self {
        NativeDispatcher {
            inner: Arc::new(Dispatcher::new(DispatchConfig::default())),
        }
    }

    /// Answers one JSON-RPC request (a JSON text); returns the response as JSON text, or
    /// `None` for a notification. `on_notify(json_text)` receives the `output` notifications
    /// a streaming `run` sends while it runs (from the thread running the command).
    #[pyo3(signature = (request, on_notify=None))]
    fn call(
        &self,
        py: Python<'_>,
        request: &str,
        on_notify: Option<Py<PyAny>>,
    ) -> PyResult<Option<String>> {
        let req: Value = serde_json::from_str(request)
            .map_err(|e| PyValueError::new_err(format!("request is not JSON: {e}")))?;
        let notify: Notify = match on_notify {
            Some(cb) => Arc::new(move |v: Value| {
                let text = v.to_string();
                Python::attach(|py| {
                    // A failing callback must not take the command down: report it the way
                    // Python reports exceptions in threads, and go on.
                    if let Err(e) = cb.call1(py, (text,)) {
                        e.write_unraisable(py, None);
                    }
                });
            }),
            None => Arc::new(|_| {}),
        };
        let inner = self.inner.clone();
        let answer = py.detach(move || inner.handle(&req, &notify));
        Ok(answer.map(|v| v.to_string()))
    }

    /// Who answers the dispatcher's calls to the client (host tools):
    /// `handler(method, params_json) -> result_json`. An exception becomes the error the
    /// guest sees: its message only, never the Python traceback.
    fn set_request_handler(&self, handler: Py<PyAny>) {
        self.inner
            .set_client(Arc::new(move |method: &str, params: Value| {
                Python::attach(|py| {
                    let answer = handler
                        .call1(py, (method, params.to_string()))
                        .and_then(|r| r.extract::<String>(py));
                    match answer {
                        Ok(text) => serde_json::from_str(&text)
                            .map_err(|e| format!("the tool's result is not JSON: {e}")),
                        Err(e) => Err(e
                            .value(py)
                            .str()
                            .map(|s| s.to_string())
                            .unwrap_or_else(|_| "the tool failed".to_string())),
                    }
                })
            }));
    }

    /// Who receives the notifications of background processes (`process.output`,
    /// `process.exit`) for the life of the dispatcher: `handler(json_text)`, called from the
    /// process's threads with the GIL taken; an exception is reported as unraisable. Without
    /// one, they go to the `on_notify` of the `call` that sent `process.start`.
    fn set_notification_handler(&self, handler: Py<PyAny>) {
        self.inner.set_notifier(Arc::new(move |v: Value| {
            let text = v.to_string();
            Python::attach(|py| {
                if let Err(e) = handler.call1(py, (text,)) {
                    e.write_unraisable(py, None);
                }
            });
        }));
    }

    /// Whether `kill` has run.
    fn is_killed(&self) -> bool {
        self.inner.is_killed()
    }
}

/// Runs the `sandboxd` server on this process's stdin/stdout (`python -m wasmsand._sandboxd`),
/// with `argv` as its command line; returns its exit status.
#[pyfunction]
fn sandboxd_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(move || sandboxd::run(argv))
}

/// The limits registry as JSON: `[{name, wire, default, unit, doc}]`, one entry per limit, in
/// the order the crate declares them. The SDK's `Limits` takes its wire names from it.
#[pyfunction]
fn limit_specs() -> String {
    wasmsand_dispatch::limit_specs_json()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDispatcher>()?;
    m.add_function(wrap_pyfunction!(sandboxd_main, m)?)?;
    m.add_function(wrap_pyfunction!(limit_specs, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
