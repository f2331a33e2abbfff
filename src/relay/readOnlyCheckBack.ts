import type { CheckBackMessage } from '../checkback/resolution';
import { TransactionResolution } from '../checkback/resolution';
import type { TxStatusReader } from '../store/ports';
import { errorFields, type Logger } from '../util/logger';
import { isUuid } from '../util/uuidv7';

/**
 * A check-back answered by a component that holds no fence (the relay): the transaction's
 * tx_record row if there is one (final: a row's status never changes), else UNKNOWN, so the
 * broker asks again and a producer decides. Never writes, never answers ROLLBACK for a missing
 * row, and a half message of another database simply has no row here.
 */
export async function answerFromRecord(
  reader: TxStatusReader,
  message: CheckBackMessage,
  logger: Logger,
): Promise<TransactionResolution> {
  const { txId } = message;
  if (txId === undefined || !isUuid(txId)) return TransactionResolution.UNKNOWN;
  try {
    const status = await reader.readStatus(txId);
    if (status === 'COMMITTED') return TransactionResolution.COMMIT;
    if (status === 'ROLLED_BACK') return TransactionResolution.ROLLBACK;
  } catch (err) {
    logger.warn({ ...errorFields(err), txId }, 'relay check-back read failed; answering UNKNOWN');
  }
  return TransactionResolution.UNKNOWN;
}
