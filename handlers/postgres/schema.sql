-- The tables of handlers/postgres/post_payment.lua. luastream makes its own
-- (luastream_processed, the entries already handled) on first use.
CREATE TABLE IF NOT EXISTS ledger (
  payment_id   bigint PRIMARY KEY,
  account      text   NOT NULL,
  amount_cents bigint NOT NULL,
  posted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS balances (
  account text   PRIMARY KEY,
  cents   bigint NOT NULL
);
