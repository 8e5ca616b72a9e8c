// Preloaded with `node --import ./loopback.mjs` in front of a server that listens on a port
// without naming a host (server-everything's `app.listen(PORT)` binds every interface): every
// TCP listen() that names no host is pinned to 127.0.0.1, so the end-to-end tests stay on
// loopback. A listen() that names a host, or a path (a Unix socket), is left as it is.
import net from 'node:net';

const original = net.Server.prototype.listen;

net.Server.prototype.listen = function listenOnLoopback(...args) {
    const [first] = args;
    const isPort = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
    if (isPort && typeof args[1] !== 'string') {
        args.splice(1, 0, '127.0.0.1');
    } else if (first !== null && typeof first === 'object' && first.path === undefined && first.host === undefined) {
        args[0] = { ...first, host: '127.0.0.1' };
    }
    return original.apply(this, args);
};
