//! Subscriptions from the client's side: `subscriptions/listen` streams in the modern era,
//! subscriptions held until the era is learned, and what a change does to the cache and the
//! tool catalog.

use super::operation::Internal;
use super::streams::Owner;
use super::{Client, EraState, Event, Output, UsageError};
use crate::http::Method;
use crate::mcp::cache::ListKind;
use crate::mcp::headers;
use crate::mcp::meta::RequestMeta;
use crate::mcp::request::Transport;
use crate::mcp::subscription::{self, Change, SubscriptionFilter, SubscriptionHandle};
use crate::time::Instant;

impl Client {
    /// Holds a subscription until the era is learned (see [`Client::subscribe`]) and starts
    /// learning it: the probe when the era is unknown, the handshake in the legacy era.
    pub(super) fn hold_subscription(
        &mut self,
        now: Instant,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, UsageError> {
        if filter.is_empty() {
            return Err(UsageError::Subscription(
                subscription::UsageError::EmptyFilter,
            ));
        }
        let sub = self.subs.reserve();
        self.held_subs.push((sub, filter));
        match self.era {
            EraState::Unknown => {
                if !self
                    .ops
                    .values()
                    .any(|o| o.internal == Some(Internal::Probe))
                {
                    self.start_probe(now);
                }
            }
            EraState::Legacy => {
                if self.session.handshake.is_none() && !self.session.ready() {
                    self.start_handshake(now);
                }
            }
            EraState::Modern { .. } => {}
        }
        self.pump(now);
        Ok(sub)
    }

    /// Opens the held subscriptions once their era is there (modern; legacy with its session).
    pub(super) fn open_held_subs(&mut self, now: Instant) {
        if self.held_subs.is_empty() {
            return;
        }
        let version = match &self.era {
            EraState::Modern { version, .. } => Some(version.clone()),
            EraState::Legacy if self.session.state.negotiated().is_some() => None,
            _ => return,
        };
        for (sub, filter) in std::mem::take(&mut self.held_subs) {
            let opened = match &version {
                Some(version) => {
                    let meta = RequestMeta::new(version.clone(), self.config.capabilities.clone())
                        .with_client_info(self.config.client_info.clone())
                        .to_object();
                    self.subs
                        .listen_as(now, sub, filter, meta, &mut self.ids)
                        .map_err(UsageError::Subscription)
                }
                None => self.legacy_subscribe(Some(sub), filter).map(|_| ()),
            };
            if let Err(e) = opened {
                self.event(Event::Subscription(subscription::Event::Ended {
                    sub,
                    reason: subscription::EndReason::NotOpened(e.to_string()),
                }));
            }
        }
    }

    pub(super) fn on_subscription_output(&mut self, output: subscription::Output) {
        match output {
            subscription::Output::Send { sub, body, .. } => {
                if self.config.transport == Transport::Stdio {
                    self.outputs.push_back(Output::Stdio(body));
                    return;
                }
                let headers = headers::request_headers(&body, None).unwrap_or_default();
                let stream = self.streams.open(Owner::Listen(sub), headers.clone());
                if let Some(old) = self.streams.by_sub.insert(sub, stream) {
                    self.streams.map.remove(&old);
                }
                self.push_http(stream, Method::Post, headers, body);
            }
            subscription::Output::CloseStream { sub, .. } => {
                if let Some(stream) = self.streams.by_sub.remove(&sub) {
                    self.streams.map.remove(&stream);
                    self.outputs.push_back(Output::CloseStream(stream));
                }
            }
            subscription::Output::Notify { body } => self.outputs.push_back(Output::Stdio(body)),
            subscription::Output::Event(e) => {
                match &e {
                    subscription::Event::Changed { change, .. } => self.apply_change(change),
                    subscription::Event::Refetch { targets, .. } => {
                        for t in targets {
                            self.apply_refetch(t);
                        }
                    }
                    subscription::Event::Ended { sub, .. } => {
                        if let Some(stream) = self.streams.by_sub.remove(sub) {
                            self.streams.map.remove(&stream);
                        }
                    }
                    _ => {}
                }
                self.event(Event::Subscription(e));
            }
        }
    }

    pub(super) fn apply_change(&mut self, change: &Change) {
        match change {
            Change::ToolsListChanged => {
                self.cache.invalidate_list(ListKind::Tools);
                self.tools.listed = false;
            }
            Change::PromptsListChanged => {
                self.cache.invalidate_list(ListKind::Prompts);
            }
            Change::ResourcesListChanged => {
                self.cache.invalidate_list(ListKind::Resources);
                self.cache.invalidate_list(ListKind::ResourceTemplates);
            }
            Change::ResourceUpdated { uri } => {
                self.cache.invalidate_resource(uri);
            }
        }
    }

    pub(super) fn apply_refetch(&mut self, target: &subscription::RefetchTarget) {
        use subscription::RefetchTarget as T;
        match target {
            T::ToolsList => {
                self.cache.invalidate_list(ListKind::Tools);
                self.tools.listed = false;
            }
            T::PromptsList => {
                self.cache.invalidate_list(ListKind::Prompts);
            }
            T::ResourcesList => {
                self.cache.invalidate_list(ListKind::Resources);
            }
            T::ResourceTemplatesList => {
                self.cache.invalidate_list(ListKind::ResourceTemplates);
            }
            T::Resource { uri } => {
                self.cache.invalidate_resource(uri);
            }
        }
    }
}
