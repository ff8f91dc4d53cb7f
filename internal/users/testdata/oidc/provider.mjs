// A real OpenID Connect provider (node-oidc-provider) for Pith's sign-in
// test: one client, the accounts "grace" (groups "operators" and
// "plant-engineers") and "vera", consent given automatically; the login
// form takes any password. Usage:
//   node provider.mjs REDIRECT_URI
// It listens on a free port of 127.0.0.1 and prints "listening PORT".
import http from 'node:http';
import Provider from 'oidc-provider';

const redirect = process.argv[2];
const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  const issuer = `http://127.0.0.1:${port}`;
  const accounts = {
    grace: { sub: 'grace-0001', preferred_username: 'grace', groups: ['operators', 'plant-engineers'] },
    vera: { sub: 'vera-0002', preferred_username: 'vera', groups: [] },
  };
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'pith',
      client_secret: 'pith-secret-for-tests',
      redirect_uris: [redirect],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    claims: { openid: ['sub'], profile: ['preferred_username', 'groups'] },
    conformIdTokenClaims: false, // the claims go into the ID token itself
    pkce: { required: () => true },
    async findAccount(ctx, id) {
      const a = accounts[id];
      if (!a) return undefined;
      return { accountId: id, async claims() { return a; } };
    },
    async loadExistingGrant(ctx) {
      // Auto-consent: grant the client whatever it asked for.
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope(ctx.oidc.params.scope);
      await grant.save();
      return grant;
    },
  });
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  server.on('request', provider.callback());
  console.log(`listening ${port}`);
});
