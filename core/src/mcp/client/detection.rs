//! Era detection and fallback (`basic/versioning.mdx`): which era the server speaks, learned
//! from its answers (HTTP: the first request goes out modern; a `4xx` without a modern error
//! means legacy) or from the stdio `server/discover` probe, the version negotiated, and the
//! fallback to the legacy session.

use super::error::IncompatibleError;
use super::operation::{op_ticket, Internal, OpState};
use super::responses::result_text;
use super::{Client, EraEvidence, Event, OpId, Operation, ProtocolChoice, RetryReason};
use crate::jsonrpc::Message;
use crate::mcp::era::{self, classify_probe, Era, ModernError, ProbeOutcome, ProbeVerdict};
use crate::mcp::legacy;
use crate::mcp::request::Transport;
use crate::mcp::{LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION};
use crate::time::Instant;

#[derive(Debug)]
pub(super) enum EraState {
    /// Not known (HTTP: requests go out modern; stdio: the probe is in flight or due).
    Unknown,
    /// Modern, with the version in use; `confirmed` once the server answered in kind.
    Modern { version: String, confirmed: bool },
    /// Legacy, through this session.
    Legacy,
}

impl Client {
    pub(super) fn latest_version(&self) -> String {
        self.config
            .versions
            .iter()
            .max()
            .cloned()
            .unwrap_or_else(|| LATEST_PROTOCOL_VERSION.to_owned())
    }

    /// `ping` exists only in the legacy era. With the era unknown on Streamable HTTP (where
    /// operations otherwise go out in the modern era, which has no ping), the era is learned
    /// first with a `server/discover` probe and the ping waits for its verdict: sent in the
    /// legacy session, or refused as [`IncompatibleError::Unsupported`] by a modern server. (stdio
    /// probes before anything anyway.)
    pub(super) fn learn_era_first(&mut self, now: Instant, op_id: OpId) -> bool {
        if self.config.transport != Transport::Http || !matches!(self.era, EraState::Unknown) {
            return false;
        }
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        if op.internal.is_some() || op.operation != Operation::Ping {
            return false;
        }
        if !self
            .ops
            .values()
            .any(|o| o.internal == Some(Internal::Probe))
        {
            self.start_probe(now);
        }
        true
    }

    pub(super) fn start_probe(&mut self, now: Instant) {
        self.start_internal(now, Operation::Discover, Internal::Probe);
    }

    pub(super) fn set_era(&mut self, era: EraState, evidence: EraEvidence) {
        let (e, version) = match &era {
            EraState::Modern { version, .. } => (Era::Modern, version.clone()),
            EraState::Legacy => (Era::Legacy, LEGACY_PROTOCOL_VERSION.to_owned()),
            EraState::Unknown => {
                self.era = era;
                return;
            }
        };
        let changed = !matches!(
            (&self.era, &era),
            (EraState::Modern { version: a, .. }, EraState::Modern { version: b, .. }) if a == b
        ) && !matches!((&self.era, &era), (EraState::Legacy, EraState::Legacy));
        if changed && !matches!(self.era, EraState::Unknown) {
            // What was learned in another era or version does not carry over.
            self.cache.clear();
            self.tools.clear();
        }
        self.era = era;
        if changed && e == Era::Modern {
            self.event(Event::EraDetected {
                era: e,
                version,
                evidence,
            });
        } else if changed {
            // The legacy version is reported once the handshake settles it.
            self.session.evidence = Some(evidence);
        }
    }

    pub(super) fn mark_modern_confirmed(&mut self) {
        match &mut self.era {
            EraState::Modern { confirmed, .. } => *confirmed = true,
            EraState::Unknown => {
                let version = self.latest_version();
                self.set_era(
                    EraState::Modern {
                        version,
                        confirmed: true,
                    },
                    EraEvidence::ModernAnswer,
                );
            }
            EraState::Legacy => {}
        }
    }

    /// HTTP, era still being detected: `server/discover` was answered with a result that is no
    /// `DiscoverResult` (see [`classify_probe`]), which a legacy server does for a method it
    /// does not know. The server is then legacy, as after a `4xx` without a modern error.
    pub(super) fn discover_answered_by_legacy(&self, op_id: OpId, message: &str) -> bool {
        let detecting = matches!(self.config.protocol, ProtocolChoice::Auto)
            && matches!(self.era, EraState::Unknown);
        let is_discover = self
            .ops
            .get(&op_id)
            .is_some_and(|op| op.internal.is_none() && matches!(op.operation, Operation::Discover));
        if !(detecting && is_discover) {
            return false;
        }
        let Ok(m) = Message::parse(message) else {
            return false;
        };
        matches!(
            ProbeOutcome::from_message(&m).map(classify_probe),
            Some(ProbeVerdict::Legacy(
                era::LegacyEvidence::NotADiscoverResult
            ))
        )
    }

    pub(super) fn on_probe_response(&mut self, now: Instant, op_id: OpId, message: &str) {
        let ticket = op_ticket(&mut self.ops, op_id);
        self.ops.remove(&op_id);
        let verdict = match Message::parse(message) {
            Ok(m) => match ProbeOutcome::from_message(&m) {
                Some(outcome) => classify_probe(outcome),
                None => return,
            },
            Err(_) => return,
        };
        if let (ProbeVerdict::Modern(_), Some(ticket), Some(result)) =
            (&verdict, ticket, result_text(message))
        {
            // The probe was a server/discover: its answer serves a host discover.
            let auth = self.config.auth_context.clone();
            let _ = self.cache.insert(now, ticket, &auth, &result);
        }
        self.probe_verdict(now, verdict);
    }

    /// The server is legacy: `op` goes out again after `initialize`.
    pub(super) fn fall_back(&mut self, now: Instant, op_id: OpId, evidence: EraEvidence) {
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        let req = match op.state {
            OpState::Sent { req } => Some(req),
            _ => None,
        };
        op.state = OpState::Queued;
        op.mrtr = None;
        op.retry_params = None;
        let internal = op.internal;
        if let Some(req) = req {
            self.supersede(now, req);
        }
        if internal.is_some() {
            self.ops.remove(&op_id);
            if let Some(
                Internal::ToolsRefresh { waiter, .. } | Internal::ToolsPrefetch { waiter, .. },
            ) = internal
            {
                if let Some(w) = self.ops.get_mut(&waiter) {
                    w.state = OpState::Queued;
                }
            }
        } else {
            self.event(Event::Retrying {
                op: op_id,
                reason: RetryReason::LegacyFallback,
            });
        }
        if !matches!(self.era, EraState::Legacy) {
            self.set_era(EraState::Legacy, evidence);
        }
        if self.session.ready() {
            // The session is already up (this answer came after the handshake).
            self.dispatch_queued(now);
        } else if self.session.handshake.is_none() {
            self.start_handshake(now);
        }
    }

    pub(super) fn modern(&mut self, version: String) {
        self.set_era(
            EraState::Modern {
                version,
                confirmed: true,
            },
            EraEvidence::ModernAnswer,
        );
    }

    pub(super) fn probe_verdict(&mut self, now: Instant, verdict: ProbeVerdict) {
        let ours: Vec<&str> = self.config.versions.iter().map(String::as_str).collect();
        let latest = self.latest_version();
        let supported = match verdict {
            ProbeVerdict::Modern(result) => result.supported_versions,
            ProbeVerdict::ModernError(ModernError::UnsupportedProtocolVersion {
                supported,
                ..
            }) => supported,
            ProbeVerdict::ModernMalformed(_) | ProbeVerdict::ModernError(_) => {
                self.modern(latest);
                return self.dispatch_queued(now);
            }
            ProbeVerdict::Legacy(evidence) => {
                let evidence = match evidence {
                    era::LegacyEvidence::Error { code, .. } => EraEvidence::ProbeError(code),
                    era::LegacyEvidence::NotADiscoverResult => EraEvidence::NotADiscoverResult,
                    era::LegacyEvidence::TimedOut => EraEvidence::ProbeTimedOut,
                };
                return self.go_legacy(now, evidence);
            }
        };
        match era::negotiate_version(&ours, &supported, &latest) {
            Ok(choice) => {
                self.modern(choice.version);
                self.dispatch_queued(now);
            }
            Err(e) => {
                let legacy_listed = supported
                    .iter()
                    .any(|v| legacy::KNOWN_LEGACY_VERSIONS.contains(&v.as_str()));
                if legacy_listed {
                    return self.go_legacy(now, EraEvidence::ModernAnswer);
                }
                self.modern(latest);
                self.fail_queued(&IncompatibleError::Version(e).into());
            }
        }
    }

    pub(super) fn go_legacy(&mut self, now: Instant, evidence: EraEvidence) {
        self.set_era(EraState::Legacy, evidence);
        if self.session.handshake.is_none() {
            self.start_handshake(now);
        }
    }
}
