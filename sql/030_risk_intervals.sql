-- The gate decides on the risk's confidence interval, not on its point estimate (docs/design.md, "Audits and the
-- gate"): each measured attack row keeps the interval of its baseline-corrected risk and its three-way verdict
-- against the threshold ('passes': upper end at or under it; 'blocked': lower end above it; 'too close to call':
-- the interval crosses it). passed stays what the policy's decide_on made of that verdict. Steward-only figures:
-- neither column reaches lineage or the consumer's card, which keep the verdict of the gate (passed) only.
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS risk_ci_low double precision;
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS risk_ci_high double precision;
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS verdict text;

-- rows stored before: the interval was already in the evidence (AttackResult.to_dict), the verdict follows from it
UPDATE governance.audit_results
   SET risk_ci_low = (evidence ->> 'risk_ci_low')::double precision,
       risk_ci_high = (evidence ->> 'risk_ci_high')::double precision
 WHERE outcome = 'measured' AND risk_ci_low IS NULL AND evidence ? 'risk_ci_low' AND evidence ? 'risk_ci_high';
UPDATE governance.audit_results
   SET verdict = CASE WHEN risk_ci_high <= threshold THEN 'passes'
                      WHEN risk_ci_low > threshold THEN 'blocked'
                      ELSE 'too close to call' END
 WHERE verdict IS NULL AND outcome = 'measured' AND threshold IS NOT NULL AND risk_ci_high IS NOT NULL;

ALTER TABLE governance.audit_results DROP CONSTRAINT IF EXISTS audit_results_risk_interval;
ALTER TABLE governance.audit_results ADD CONSTRAINT audit_results_risk_interval
    CHECK ((risk_ci_low IS NULL) = (risk_ci_high IS NULL)
           AND (risk_ci_low IS NULL OR (outcome = 'measured' AND 0 <= risk_ci_low AND risk_ci_low <= risk_ci_high
                                        AND risk_ci_high <= 1)));
ALTER TABLE governance.audit_results DROP CONSTRAINT IF EXISTS audit_results_verdict;
ALTER TABLE governance.audit_results ADD CONSTRAINT audit_results_verdict
    CHECK (verdict IS NULL OR (verdict IN ('passes', 'too close to call', 'blocked') AND risk_ci_high IS NOT NULL
                               AND threshold IS NOT NULL));
