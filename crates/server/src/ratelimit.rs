//! Per-user request rate limits on what costs the server most besides runs (those have
//! their own quotas, `crate::quotas`): creating sessions, uploading, downloading, and the
//! admin endpoints, whose views scan the store. One middleware on the whole API decides by
//! the matched route, the PRD's "rate limits via a shared dependency".
//!
//! Each limit is a GCRA (`governor`) per user: up to the per-minute number at once, then one
//! more every minute / that number. The limiters read the app's clock, so tests move time
//! instead of sleeping. They are per process: replicas behind one balancer each allow the
//! limit (run quotas, which are counted in the shared store, are the ones exact across
//! replicas).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};

use crate::App;
use crate::auth::Principal;
use crate::config::Config;
use crate::error::ErrorCode;

/// What a request is limited as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    SessionCreate,
    Upload,
    Download,
    Admin,
}

impl Class {
    #[cfg(test)]
    pub const ALL: [Class; 4] = [
        Class::SessionCreate,
        Class::Upload,
        Class::Download,
        Class::Admin,
    ];

    /// The name in the refusal's `details.quota` and in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Class::SessionCreate => "sessions_per_minute",
            Class::Upload => "uploads_per_minute",
            Class::Download => "downloads_per_minute",
            Class::Admin => "admin_requests_per_minute",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Class::SessionCreate => "created sessions",
            Class::Upload => "uploaded",
            Class::Download => "downloaded",
            Class::Admin => "called the admin endpoints",
        }
    }

    /// The class of a route of the API (its template, without the base path).
    pub fn of(method: &Method, route: &str) -> Option<Class> {
        if route.starts_with("/admin/") || route == "/admin" {
            return Some(Class::Admin);
        }
        match (method.as_str(), route) {
            ("POST", "/sessions" | "/sessions/{id}/fork") => Some(Class::SessionCreate),
            ("POST", "/sessions/{id}/files") | ("PUT", "/sessions/{id}/files/content") => {
                Some(Class::Upload)
            }
            ("GET", "/sessions/{id}/files/content" | "/runs/{id}/artifacts/{*path}") => {
                Some(Class::Download)
            }
            _ => None,
        }
    }
}

/// The app's clock as governor's: instants are the time since the Unix epoch.
#[derive(Clone)]
struct AppClock(crate::clock::Clock);

impl Clock for AppClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Duration::from_millis(self.0.now_ms().max(0) as u64)
    }
}

type Limiter = RateLimiter<String, HashMapStateStore<String>, AppClock, NoOpMiddleware<Duration>>;

pub struct RateLimits {
    clock: AppClock,
    /// Per [`Class`], in its order; `None` when that limit is off (0).
    limiters: [Option<(u32, Limiter)>; 4],
}

impl RateLimits {
    pub fn new(config: &Config, clock: crate::clock::Clock) -> RateLimits {
        let clock = AppClock(clock);
        let limiter = |per_minute: u64| {
            let n = u32::try_from(per_minute).unwrap_or(u32::MAX);
            NonZeroU32::new(n).map(|nz| {
                (
                    n,
                    RateLimiter::hashmap_with_clock(Quota::per_minute(nz), clock.clone()),
                )
            })
        };
        RateLimits {
            limiters: [
                limiter(config.user_sessions_per_minute),
                limiter(config.user_uploads_per_minute),
                limiter(config.user_downloads_per_minute),
                limiter(config.admin_requests_per_minute),
            ],
            clock,
        }
    }

    fn limiter(&self, class: Class) -> Option<&(u32, Limiter)> {
        let i = match class {
            Class::SessionCreate => 0,
            Class::Upload => 1,
            Class::Download => 2,
            Class::Admin => 3,
        };
        self.limiters[i].as_ref()
    }

    /// Takes one request of `user` of `class`; `Err` with the seconds until one is allowed.
    pub fn check(&self, class: Class, user: &str) -> Result<(), (u32, u64)> {
        let Some((n, limiter)) = self.limiter(class) else {
            return Ok(());
        };
        limiter.check_key(&user.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            (*n, wait.as_millis().div_ceil(1000) as u64)
        })
    }

    /// Forgets users whose limits are back to full: the maps only hold recent users.
    pub fn shrink(&self) {
        for (_, l) in self.limiters.iter().flatten() {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

/// The middleware: after authentication (it reads the [`Principal`]), before the handler.
pub async fn limit(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let class = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str())
        .map(|r| r.strip_prefix(crate::http::BASE).unwrap_or(r))
        .and_then(|route| Class::of(req.method(), route));
    let user = req
        .extensions()
        .get::<Principal>()
        .map(|p| p.user_id.clone());
    if let (Some(class), Some(user)) = (class, user)
        && let Err((limit, retry)) = app.rate_limits.check(class, &user)
    {
        return crate::quotas::refuse(
            &app,
            ErrorCode::RateLimited,
            class.name(),
            format!(
                "user '{user}' {} more than {limit} times in a minute; \
                 try again in {retry} s",
                class.what()
            ),
            u64::from(limit),
            u64::from(limit),
            retry,
        )
        .into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_minute: u64) -> (RateLimits, crate::clock::Clock) {
        let config = Config {
            user_sessions_per_minute: per_minute,
            user_uploads_per_minute: 0,
            ..Config::default()
        };
        let clock = crate::clock::Clock::default();
        (RateLimits::new(&config, clock.clone()), clock)
    }

    #[test]
    fn a_user_gets_the_burst_then_one_per_interval() {
        let (l, clock) = limits(3);
        for _ in 0..3 {
            l.check(Class::SessionCreate, "a").unwrap();
        }
        let (limit, retry) = l.check(Class::SessionCreate, "a").unwrap_err();
        assert_eq!(limit, 3);
        assert!((1..=20).contains(&retry), "{retry}");
        // Other users and other classes are not affected.
        l.check(Class::SessionCreate, "b").unwrap();
        for _ in 0..100 {
            l.check(Class::Upload, "a").unwrap();
        }
        clock.advance(Duration::from_secs(20));
        l.check(Class::SessionCreate, "a").unwrap();
        assert!(l.check(Class::SessionCreate, "a").is_err());
        clock.advance(Duration::from_secs(60));
        for _ in 0..3 {
            l.check(Class::SessionCreate, "a").unwrap();
        }
        l.shrink();
    }

    #[test]
    fn routes_are_classed_by_method_and_template() {
        let c = |m: Method, r: &str| Class::of(&m, r);
        assert_eq!(c(Method::POST, "/sessions"), Some(Class::SessionCreate));
        assert_eq!(
            c(Method::POST, "/sessions/{id}/fork"),
            Some(Class::SessionCreate)
        );
        assert_eq!(c(Method::GET, "/sessions"), None);
        assert_eq!(c(Method::POST, "/sessions/{id}/files"), Some(Class::Upload));
        assert_eq!(
            c(Method::PUT, "/sessions/{id}/files/content"),
            Some(Class::Upload)
        );
        assert_eq!(
            c(Method::GET, "/sessions/{id}/files/content"),
            Some(Class::Download)
        );
        assert_eq!(
            c(Method::GET, "/runs/{id}/artifacts/{*path}"),
            Some(Class::Download)
        );
        assert_eq!(c(Method::GET, "/runs/{id}/artifacts"), None);
        assert_eq!(c(Method::POST, "/admin/gc"), Some(Class::Admin));
        assert_eq!(c(Method::GET, "/admin/runs/{id}"), Some(Class::Admin));
        assert_eq!(c(Method::POST, "/runs"), None);
    }
}
