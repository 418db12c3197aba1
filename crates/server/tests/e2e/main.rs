//! End-to-end tests of the service over real HTTP and WebSocket on loopback.

mod admin;
mod api;
mod artifacts;
mod common;
mod mcp;
mod openapi;
mod restart;
mod runs;
mod uploads;
mod ws;
