//! `run.cancel` through the queueing server, as `sandboxd` and the Node addon drive it: it
//! takes effect at arrival, stops the run its lane is busy with or one still queued behind
//! it, and never touches a run it does not name.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};
use wasmsand_dispatch::{DispatchConfig, Dispatcher, Notify, Server};

fn server() -> (Server, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let sink: Notify = Arc::new(move |v| s.lock().push(v));
    let d = Arc::new(Dispatcher::new(DispatchConfig::default()));
    (Server::new(d, sink), seen)
}

fn send(s: &Server, id: Value, method: &str, params: Value) {
    s.submit(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
}

/// The answer to request `id`, waiting for it.
fn answer(seen: &Mutex<Vec<Value>>, id: &Value) -> Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(a) = seen
            .lock()
            .iter()
            .find(|v| v.get("id") == Some(id) && v.get("method").is_none())
        {
            return a.clone();
        }
        assert!(
            Instant::now() < until,
            "no answer to {id}: {:?}",
            seen.lock()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the run of request `id` has started (its first output is streamed).
fn started(seen: &Mutex<Vec<Value>>, id: &Value) {
    let until = Instant::now() + Duration::from_secs(60);
    while !seen
        .lock()
        .iter()
        .any(|v| v["method"] == "output" && v["params"]["requestId"] == *id)
    {
        assert!(Instant::now() < until, "the run never started");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_running_run_is_cancelled_and_the_sandbox_goes_on() {
    let (s, seen) = server();
    send(&s, json!(1), "run", json!({"command": "X=kept"}));
    assert_eq!(answer(&seen, &json!(1))["result"]["exitCode"], 0);
    send(
        &s,
        json!("long"),
        "run",
        json!({"command": "echo begun; sleep 30; echo never", "stream": true}),
    );
    started(&seen, &json!("long"));
    send(&s, json!(2), "run.cancel", json!({"requestId": "long"}));
    assert_eq!(
        answer(&seen, &json!(2))["result"],
        json!({"cancelled": true})
    );
    let r = &answer(&seen, &json!("long"))["result"];
    assert_eq!(r["errorClass"], "CANCELLED", "{r}");
    assert_eq!(r["exitCode"], 130);
    assert_eq!(r["stdout"], "begun\n");
    assert_eq!(r["stderr"], "command cancelled\n");

    // The id has answered: cancelling it again finds nothing, and a new run reusing the id
    // is not stopped by the old cancel.
    send(&s, json!(3), "run.cancel", json!({"requestId": "long"}));
    assert_eq!(
        answer(&seen, &json!(3))["result"],
        json!({"cancelled": false})
    );
    seen.lock().clear();
    send(&s, json!("long"), "run", json!({"command": "echo $X"}));
    let r = &answer(&seen, &json!("long"))["result"];
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdout"], "kept\n");
}

#[test]
fn a_queued_run_is_cancelled_before_it_starts_and_does_nothing() {
    let (s, seen) = server();
    send(
        &s,
        json!(1),
        "run",
        json!({"command": "echo first; sleep 30", "stream": true}),
    );
    started(&seen, &json!(1));
    // Queued behind run 1 on the same lane.
    send(
        &s,
        json!(2),
        "run",
        json!({"command": "echo made > made.txt"}),
    );
    send(&s, json!(3), "run.cancel", json!({"requestId": 2}));
    assert_eq!(
        answer(&seen, &json!(3))["result"],
        json!({"cancelled": true})
    );
    // Numeric 1 and string "1" are different requests.
    send(&s, json!(4), "run.cancel", json!({"requestId": "1"}));
    assert_eq!(
        answer(&seen, &json!(4))["result"],
        json!({"cancelled": false})
    );
    send(&s, json!(5), "run.cancel", json!({"requestId": 1}));
    assert_eq!(
        answer(&seen, &json!(5))["result"],
        json!({"cancelled": true})
    );
    assert_eq!(
        answer(&seen, &json!(1))["result"]["errorClass"],
        "CANCELLED"
    );
    let r = &answer(&seen, &json!(2))["result"];
    assert_eq!(r["errorClass"], "CANCELLED", "{r}");
    send(
        &s,
        json!(6),
        "run",
        json!({"command": "test -e made.txt && echo there || echo absent"}),
    );
    assert_eq!(answer(&seen, &json!(6))["result"]["stdout"], "absent\n");
}

#[test]
fn a_fork_run_is_cancelled_without_touching_the_root() {
    let (s, seen) = server();
    send(&s, json!(1), "sandbox.fork", json!({}));
    let fork = answer(&seen, &json!(1))["result"]["sandboxId"].clone();
    send(
        &s,
        json!(2),
        "run",
        json!({"command": "echo f; sleep 30", "stream": true, "sandboxId": fork}),
    );
    send(
        &s,
        json!(3),
        "run",
        json!({"command": "echo r; sleep 0.3; echo root done", "stream": true}),
    );
    started(&seen, &json!(2));
    started(&seen, &json!(3));
    send(&s, json!(4), "run.cancel", json!({"requestId": 2}));
    assert_eq!(
        answer(&seen, &json!(2))["result"]["errorClass"],
        "CANCELLED"
    );
    let r = &answer(&seen, &json!(3))["result"];
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdout"], "r\nroot done\n");
}

#[test]
fn a_request_id_that_is_not_one_is_invalid_params() {
    let (s, seen) = server();
    for (n, params) in [
        json!({}),
        json!({"requestId": {"a": 1}}),
        json!({"requestId": null}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = json!(n);
        send(&s, id.clone(), "run.cancel", params);
        let a = answer(&seen, &id);
        assert_eq!(a["error"]["code"], -32602, "{a}");
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("requestId")
        );
    }
}
