//! End-to-end tests of the service over real HTTP and WebSocket on loopback (moved from
//! crates/server/tests/e2e).

mod admin;
mod admin_policy;
mod api;
mod artifacts;
mod audit;
mod auth;
pub(crate) mod common;
mod fairness;
pub(crate) mod files;
pub(crate) mod git;
mod interactive;
pub(crate) mod mcp;
mod metrics;
mod network;
mod openapi;
mod operator;
mod os_limits;
mod processes;
mod quotas;
mod restart;
mod runs;
mod shapes;
mod traces;
mod uploads;
mod vm;
mod ws;
