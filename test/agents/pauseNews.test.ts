import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { acceptedStatus, PauseNews, pauseNewsMaxAgeMs } from '../../shared/agents/pauseNews.js';

describe('pause news: a call starts only on news of a pause under a second old', () => {
  it('is stale until something is heard, and again once the news is older than the limit', () => {
    const news = new PauseNews();
    assert.equal(news.stale(0), true, 'nothing heard yet');
    news.heard(10_000);
    assert.equal(news.stale(10_000 + pauseNewsMaxAgeMs), false);
    assert.equal(news.stale(10_000 + pauseNewsMaxAgeMs + 1), true);
    news.heard(5_000);
    assert.equal(news.stale(10_500), false, 'older news never makes it staler');
  });

  it('one look serves every call that starts while it is on the way, and none is made while fresh', async () => {
    const news = new PauseNews();
    let looks = 0;
    let answer!: () => void;
    const look = () => {
      looks += 1;
      return new Promise<void>((r) => (answer = r));
    };
    const calls = [news.fresh(1_000, look), news.fresh(1_010, look), news.fresh(1_020, look)];
    assert.equal(looks, 1);
    answer();
    await Promise.all(calls);
    await news.fresh(1_900, look);
    assert.equal(looks, 1, 'the look counts from when it was sent (1,000): fresh at 1,900');
    void news.fresh(2_001, look);
    assert.equal(looks, 2, 'stale again past a second');
    answer();
  });

  it('a look that fails leaves the news stale, so the next call looks again', async () => {
    const news = new PauseNews();
    await assert.rejects(
      news.fresh(1_000, () => Promise.reject(new Error('table down'))),
      /table down/,
    );
    assert.equal(news.stale(1_001), true);
    let looked = false;
    await news.fresh(1_001, async () => {
      looked = true;
    });
    assert.equal(looked, true);
  });

  it('a look that does not answer lets the call go after the wait, and the next call sends its own', async () => {
    const news = new PauseNews();
    let looks = 0;
    const hang = () => {
      looks += 1;
      return new Promise<void>(() => undefined);
    };
    const began = Date.now();
    assert.equal(await news.fresh(1_000, hang, 50), false, 'the call goes on without the news');
    assert.ok(Date.now() - began >= 45, 'after the wait');
    assert.equal(news.stale(1_001), true);
    const second = news.fresh(1_001, hang, 20);
    assert.equal(looks, 2, 'a look given up is not waited on again');
    void news.fresh(1_002, hang, 20);
    assert.equal(looks, 2, 'but the new one is shared');
    assert.equal(await second, false);
  });

  it('a look given up that fails late does not drop the newer look on the way', async () => {
    const news = new PauseNews();
    const looks: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
    const look = () => new Promise<void>((resolve, reject) => looks.push({ resolve, reject }));
    assert.equal(await news.fresh(1_000, look, 10), false, 'the first look is given up');
    const second = news.fresh(1_000, look, 1_000);
    assert.equal(looks.length, 2);
    looks[0].reject(new Error('late failure')); // the news stays stale
    await new Promise((r) => setImmediate(r));
    const third = news.fresh(1_000, look, 1_000);
    assert.equal(looks.length, 2, 'the second look is still the one on the way');
    looks[1].resolve();
    assert.deepEqual(await Promise.all([second, third]), [true, true]);
  });

  it('with a limit of 0 the news is never stale: no look at all (CALL_BUDGET_PAUSE_NEWS_SECONDS=0)', async () => {
    const news = new PauseNews(0);
    assert.equal(news.stale(1e12), false);
    let looks = 0;
    assert.equal(
      await news.fresh(1e12, async () => {
        looks += 1;
      }),
      true,
    );
    assert.equal(looks, 0);
  });

  it("counts the service's answers, not its refusals nor a call it never answered", () => {
    for (const s of [200, 201, 400, 404, 409, 422]) assert.equal(acceptedStatus(s), true, `${s}`);
    for (const s of [429, 500, 502, 503, 504, undefined]) assert.equal(acceptedStatus(s), false, `${s}`);
  });
});
