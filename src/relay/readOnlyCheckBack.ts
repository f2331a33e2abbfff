import type { CheckBackMessage, TransactionResolution } from '../checkback/resolution';
import { answerReadOnly } from '../checkback/fence';
import type { TxStatusReader } from '../store/ports';
import type { Logger } from '../util/logger';

/**
 * A check-back answered by a component that holds no fence (the relay): the fence in read-only
 * mode (src/checkback/fence.ts answerReadOnly): the transaction's tx_record row if there is one
 * (final: a row's status never changes), else UNKNOWN, so the broker asks again and a producer
 * decides. Never writes, never answers ROLLBACK for a missing row, and a half message of another
 * database simply has no row here.
 */
export async function answerFromRecord(
  reader: TxStatusReader,
  message: CheckBackMessage,
  logger: Logger,
): Promise<TransactionResolution> {
  return (await answerReadOnly(reader, message, logger)).resolution;
}
