// Preloaded with `node --import ./everything_spy.mjs` in front of server-everything (which runs
// on the v1 TypeScript SDK, `@modelcontextprotocol/sdk`): lets the end-to-end tests see what the
// server received, which the package itself never reports. It changes no behaviour; it counts
// and adds one tool:
//
// - every inbound request and notification, by method (on every server instance of the process);
// - every `notifications/cancelled` that found its request still running (the SDK then aborts
//   that handler's signal): `cancelledRunning`;
// - the tool `spy-stats` (registered on each server before it connects) answers all that as JSON:
//   `{"requests": {METHOD: N}, "notifications": {METHOD: N}, "cancelledRunning": N}`.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Protocol } from '@modelcontextprotocol/sdk/shared/protocol.js';

const seen = { requests: {}, notifications: {}, cancelledRunning: 0 };

const bump = (counts, method) => {
    counts[method] = (counts[method] ?? 0) + 1;
};

const onrequest = Protocol.prototype._onrequest;
Protocol.prototype._onrequest = function countRequest(request, extra) {
    bump(seen.requests, request.method);
    return onrequest.call(this, request, extra);
};

const onnotification = Protocol.prototype._onnotification;
Protocol.prototype._onnotification = function countNotification(notification) {
    bump(seen.notifications, notification.method);
    return onnotification.call(this, notification);
};

const oncancel = Protocol.prototype._oncancel;
Protocol.prototype._oncancel = function countCancel(notification) {
    const id = notification.params?.requestId;
    if (id !== undefined && this._requestHandlerAbortControllers?.has(id)) seen.cancelledRunning += 1;
    return oncancel.call(this, notification);
};

const connect = McpServer.prototype.connect;
McpServer.prototype.connect = function connectWithSpy(transport) {
    if (!this._registeredTools['spy-stats']) {
        this.registerTool('spy-stats', { description: 'What this process received (test instrumentation).' }, async () => ({
            content: [{ type: 'text', text: JSON.stringify(seen) }]
        }));
    }
    return connect.call(this, transport);
};
