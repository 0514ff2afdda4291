import { errorHref, ServiceError, type ErrorBody } from '../errors.js';

/**
 * Maps anything thrown to the spec's error object, with its `href` (README: Errors, every error's
 * href points at its code's entry): a batch call's per-channel errors carry it as the whole reply's
 * error does. Only real faults become 5xx.
 */
export function toErrorBody(err: unknown): ErrorBody {
  const body = errorBodyOf(err);
  return { ...body, href: errorHref(body.code) };
}

function errorBodyOf(err: unknown): ErrorBody {
  if (err instanceof ServiceError) return err.toJSON();
  const e = err as { code?: string; statusCode?: number; message?: string };
  const fastifyCode = typeof e.code === 'string' ? e.code : '';
  if (fastifyCode === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new ServiceError('payloadTooLarge', 'the request body is larger than this service accepts').toJSON();
  }
  if (fastifyCode === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ServiceError(
      'unsupportedMediaType',
      'unsupported Content-Type; use application/json, application/x-msgpack or application/x-www-form-urlencoded',
    ).toJSON();
  }
  if (fastifyCode.startsWith('FST_ERR_CTP_') || fastifyCode === 'FST_ERR_VALIDATION' || (e.statusCode === 400 && e.message)) {
    return new ServiceError('invalidRequestBody', `malformed request: ${e.message ?? 'invalid body'}`).toJSON();
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return { code: e.statusCode * 100, statusCode: e.statusCode, message: e.message ?? 'bad request' };
  }
  return new ServiceError('internal', 'internal error').toJSON();
}
