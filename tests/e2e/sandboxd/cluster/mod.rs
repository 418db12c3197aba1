//! Replicated deployments: the store suite on memory, SQLite and PostgreSQL; two real
//! `sandboxd serve` processes sharing one PostgreSQL (started by the tests, see `pg`); the
//! Kubernetes example of docs/deploy.md.

mod admission;
mod durable;
mod k8s;
mod mcp_sessions;
pub mod pg;
mod replicas;
mod store;
