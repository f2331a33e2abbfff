/** The client option for an ACL 2.0 user: `{ sessionCredentials }`, or nothing without one. */
export function sessionCredentials(credentials?: { accessKey: string; accessSecret: string }): {
  sessionCredentials?: { accessKey: string; accessSecret: string };
} {
  return credentials
    ? { sessionCredentials: { accessKey: credentials.accessKey, accessSecret: credentials.accessSecret } }
    : {};
}
