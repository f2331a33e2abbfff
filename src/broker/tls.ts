import { createRequire } from 'node:module';
import type { BaseClient } from 'rocketmq-client-nodejs';

/**
 * Custom CA for rocketmq-client-nodejs 1.0.8, which only knows `sslEnabled` (system CAs): its
 * RpcClientManager builds each channel with `new RpcClient(endpoints, client.sslEnabled)` and the
 * RpcClient calls `ChannelCredentials.createSsl()` without roots. We replace the module's
 * RpcClient export once with a wrapper that, for a client whose `sslEnabled` holds a CustomCa,
 * makes that one synchronous constructor call use `createSsl(ca)`. Clients without a CustomCa
 * are untouched, and nothing process-wide (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH) is set.
 * Tested against the real TLS proxy (test/integration/security.isolated.test.ts).
 */

const clientRequire = createRequire(require.resolve('rocketmq-client-nodejs/dist/client/RpcClient'));

interface RpcClientModule {
  RpcClient: new (endpoints: unknown, sslEnabled: unknown) => unknown;
}
interface GrpcModule {
  ChannelCredentials: { createSsl: (rootCerts?: Buffer | null, ...rest: unknown[]) => unknown };
}

/** Carried in the client's `sslEnabled` field: truthy, so the client still means "TLS". */
export class CustomCa {
  constructor(readonly ca: Buffer) {}
}

const PATCHED = Symbol.for('rocketmq-tx.customCaRpcClient');
let installed = false;

function installRpcClientPatch(): void {
  if (installed) return;
  const mod = clientRequire('./RpcClient') as RpcClientModule;
  const grpc = clientRequire('@grpc/grpc-js') as GrpcModule;
  const Original = mod.RpcClient as RpcClientModule['RpcClient'] & { [PATCHED]?: true };
  if (Original[PATCHED]) {
    installed = true;
    return;
  }
  function RpcClientWithCustomCa(endpoints: unknown, sslEnabled: unknown): unknown {
    if (!(sslEnabled instanceof CustomCa)) return new Original(endpoints, sslEnabled);
    const credentials = grpc.ChannelCredentials;
    const createSsl = credentials.createSsl;
    // Synchronous: no other code runs while the override is in place.
    credentials.createSsl = (...args: unknown[]) =>
      args.length === 0
        ? createSsl.call(credentials, sslEnabled.ca)
        : createSsl.apply(credentials, args as []);
    try {
      return new Original(endpoints, true);
    } finally {
      credentials.createSsl = createSsl;
    }
  }
  RpcClientWithCustomCa.prototype = Original.prototype;
  (RpcClientWithCustomCa as unknown as { [PATCHED]: true })[PATCHED] = true;
  mod.RpcClient = RpcClientWithCustomCa as unknown as RpcClientModule['RpcClient'];
  installed = true;
}

/** Makes the client's channels trust `ca` (PEM) instead of the system CAs. Call before startup(). */
export function useCustomCa(client: BaseClient, ca: Buffer): void {
  installRpcClientPatch();
  (client as unknown as { sslEnabled: unknown }).sslEnabled = new CustomCa(ca);
}
