import * as net from 'node:net';

/**
 * A loopback TCP proxy that a test can cut and restore, to make a database unreachable. With
 * `httpConnect` it is an HTTP CONNECT proxy instead (tunnels to the host:port each client asks
 * for): set `grpc_proxy=http://127.0.0.1:<port>` while creating gRPC clients, and every channel
 * they open (also to the broker addresses a route returns) goes through it.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private open = true;
  port = 0;
  /** CONNECT tunnels opened so far (httpConnect mode). */
  tunnels = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly options: { httpConnect?: boolean } = {},
  ) {}

  async start(): Promise<this> {
    this.server = net.createServer((client) => {
      if (!this.open) {
        client.destroy();
        return;
      }
      if (this.options.httpConnect) {
        this.tunnel(client);
        return;
      }
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  /** Reads `CONNECT host:port ...\r\n\r\n`, answers 200 and pipes the rest both ways. */
  private tunnel(client: net.Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => undefined);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      client.pause(); // pipe() resumes it once the upstream is connected
      const target = /^CONNECT ([^\s:]+):(\d+) /.exec(head.toString('latin1'));
      if (!target) {
        client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
        return;
      }
      const upstream = net.connect(Number(target[2]), target[1]!, () => {
        this.tunnels++;
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        const rest = head.subarray(end + 4);
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      this.sockets.add(upstream);
      upstream.on('close', () => {
        this.sockets.delete(upstream);
        client.destroy();
      });
      upstream.on('error', () => undefined);
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  }

  /** Drops every connection and refuses new ones. */
  cut(): void {
    this.open = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.open = true;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}
