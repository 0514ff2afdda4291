// The one error catalog. Codes and statuses follow the spec and the public error catalogue
// (test/fixtures/ably-common-errors.json); a unit test checks every code here exists there.

export const ErrorCodes = {
  badRequest: { code: 40000, statusCode: 400 },
  invalidRequestBody: { code: 40001, statusCode: 400 },
  invalidParameterName: { code: 40002, statusCode: 400 },
  invalidParameterValue: { code: 40003, statusCode: 400 },
  invalidHeader: { code: 40004, statusCode: 400 },
  messageTooLarge: { code: 40009, statusCode: 400 },
  invalidChannelName: { code: 40010, statusCode: 400 },
  invalidClientId: { code: 40012, statusCode: 400 },
  invalidDataOrEncoding: { code: 40013, statusCode: 400 },
  invalidMessageName: { code: 40016, statusCode: 400 },
  unsupportedProtocolVersion: { code: 40017, statusCode: 400 },
  batchError: { code: 40020, statusCode: 400 },
  invalidPublishRequest: { code: 40030, statusCode: 400 },
  invalidMessageId: { code: 40031, statusCode: 400 },
  invalidExtras: { code: 40032, statusCode: 400 },
  tooManyMessages: { code: 40034, statusCode: 400 },
  unauthorized: { code: 40100, statusCode: 401 },
  invalidCredentials: { code: 40101, statusCode: 401 },
  incompatibleCredentials: { code: 40102, statusCode: 401 },
  tokenRequestTimestampOutsideWindow: { code: 40104, statusCode: 401 },
  nonceReplayed: { code: 40105, statusCode: 401 },
  noAuthentication: { code: 40106, statusCode: 401 },
  tokenRevocationNotEnabled: { code: 40121, statusCode: 401 },
  keyNotRecognized: { code: 40130, statusCode: 401 },
  keyRevoked: { code: 40131, statusCode: 401 },
  tokenError: { code: 40140, statusCode: 401 },
  tokenRevoked: { code: 40141, statusCode: 401 },
  tokenExpired: { code: 40142, statusCode: 401 },
  tokenUnrecognized: { code: 40143, statusCode: 401 },
  invalidJwt: { code: 40144, statusCode: 401 },
  capabilityDenied: { code: 40160, statusCode: 401 },
  basicAuthenticationRequired: { code: 40162, statusCode: 401 },
  keyTokensNotRevocable: { code: 40163, statusCode: 401 },
  // The catalogue's application_api_key_limit_exceeded; 403 rather than a 401, which clients take as "authenticate again".
  keyLimitExceeded: { code: 40127, statusCode: 403 },
  // The catalogue's account_application_limit_exceeded (sandbox POST /apps), 403 likewise.
  appLimitExceeded: { code: 40128, statusCode: 403 },
  // The catalogue's account_channel_limit_exceeded: an app (or the service) holds the most active channels it may.
  channelLimitExceeded: { code: 40114, statusCode: 403 },
  notFound: { code: 40400, statusCode: 404 },
  methodNotAllowed: { code: 40500, statusCode: 405 },
  payloadTooLarge: { code: 40009, statusCode: 413 },
  unsupportedMediaType: { code: 40001, statusCode: 415 },
  requestTimeout: { code: 40000, statusCode: 408 },
  headersTooLarge: { code: 40004, statusCode: 431 },
  rateLimited: { code: 42910, statusCode: 429 },
  internal: { code: 50000, statusCode: 500 },
  timeout: { code: 50003, statusCode: 504 },
  serverBusy: { code: 50004, statusCode: 503 },
  unavailable: { code: 50005, statusCode: 503 },

  // The realtime interface (src/realtime/).
  inboundRateExceeded: { code: 42911, statusCode: 429 },
  connectionsLimit: { code: 42910, statusCode: 503 },
  connectionExpired: { code: 80008, statusCode: 400 },
  protocolError: { code: 80013, statusCode: 400 },
  connectionTimedOut: { code: 80014, statusCode: 408 },
  connectionClosed: { code: 80017, statusCode: 400 },
  invalidConnectionKey: { code: 80018, statusCode: 400 },
  deliveryRateExceeded: { code: 80020, statusCode: 429 },
  serviceShuttingDown: { code: 80003, statusCode: 503 },
  continuityLost: { code: 90003, statusCode: 404 },
  tooManyChannels: { code: 90010, statusCode: 400 },
  presenceWithoutClientId: { code: 91000, statusCode: 400 },
  tooManyPresenceMembers: { code: 91003, statusCode: 400 },
} as const satisfies Record<string, { code: number; statusCode: number }>;

export type ErrorKind = keyof typeof ErrorCodes;

export class ServiceError extends Error {
  readonly code: number;
  readonly statusCode: number;

  /** `cause`: what went wrong inside, for the service's log only (clients get `message`). */
  constructor(kind: ErrorKind, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ServiceError';
    this.code = ErrorCodes[kind].code;
    this.statusCode = ErrorCodes[kind].statusCode;
  }

  toJSON(): ErrorBody {
    return { code: this.code, statusCode: this.statusCode, message: this.message };
  }
}

export interface ErrorBody {
  code: number;
  statusCode: number;
  message: string;
  href?: string;
}

/**
 * A failed log append as the client sees it: a ServiceError of its own as it is, else unavailable
 * (50005) saying `message`; the log's own error (a broker's address, a file's path) is kept as the
 * cause, for the service log, and not shown to the client.
 */
export const appendFailure = (err: unknown, message: string): ServiceError => (err instanceof ServiceError ? err : new ServiceError('unavailable', message, err));

export const fail = (kind: ErrorKind, message: string): never => {
  throw new ServiceError(kind, message);
};

/** Where a code is explained: this service's own list (GET /errors, src/error-list.ts; the README's table). */
export const errorHref = (code: number): string => `/errors#error-${code}`;
