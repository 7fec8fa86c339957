"""A self-written help-centre corpus for retrieval benchmarks: 1,020 articles and labelled questions.

What it is, honestly: templated articles about invented home electronics (62 products
with English articles, 40 other products with Russian ones; ten topics each: reset,
warranty, firmware, an error code, cleaning, returns, battery, pairing, technical data,
noises). Every article's facts (numbers, codes, buttons, colours) are drawn from a
seeded random generator, and each sentence has two or three wordings, so articles of
one topic differ in more than the product name. Questions are written separately,
in other words than the articles (synonyms, a symptom instead of the topic's name),
and labelled with the one article that answers them:

- ``en``: English questions about English articles;
- ``ru``: Russian questions about Russian articles;
- ``ru->en``: Russian questions about products documented only in English.

Nothing is downloaded; the same seed writes the same corpus. It is not the demo
knowledge base, and the product was not tuned on it before it was written.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

BRANDS = ["Corvia", "Altena", "Brivo", "Duneo", "Elvix", "Fenra", "Gorsk", "Halvo", "Istra", "Jalto", "Kerno",
          "Lumea", "Movik", "Nardo", "Orsel", "Pravo", "Quenta", "Rindo", "Solva", "Tarvik", "Umbra", "Velto",
          "Wendo", "Xarta", "Yllis", "Zorba"]
# (English, Russian nominative, Russian accusative) names of the product kinds.
KINDS = [("router", "роутер", "роутер"), ("camera", "камера", "камеру"), ("thermostat", "термостат", "термостат"),
         ("speaker", "колонка", "колонку"), ("air purifier", "очиститель воздуха", "очиститель воздуха"),
         ("robot vacuum", "робот-пылесос", "робот-пылесос"), ("smart kettle", "умный чайник", "умный чайник"),
         ("label printer", "принтер этикеток", "принтер этикеток")]
BUTTONS = [("power", "питания"), ("reset", "сброса"), ("mode", "режима"), ("Wi-Fi", "Wi-Fi")]
COLOURS = [("red", "красным"), ("blue", "синим"), ("white", "белым"), ("orange", "оранжевым")]
PARTS = [("fan", "вентилятор"), ("sensor", "датчик"), ("motor", "мотор"), ("heating element", "нагревательный элемент")]
PROBLEMS = [("overheating", "перегревается"), ("blocked", "заблокирован"), ("not responding", "не отвечает")]
FIXES = [("let it cool down for {n} minutes", "дайте ему остыть {n} минут"),
         ("remove the dust around it with a dry brush", "удалите пыль вокруг него сухой кисточкой"),
         ("unplug it for {n} minutes", "отключите его от сети на {n} минут")]
CARRIERS = ["ParcelPoint", "QuickDrop", "PostLine"]
FEATURES = [("the status light", "индикатор состояния"), ("voice control", "голосовое управление"),
            ("motion detection", "датчик движения")]


@dataclass(frozen=True)
class Article:
    path: str  # relative path, also the label the questions use
    language: str
    text: str


@dataclass(frozen=True)
class Question:
    setting: str  # "en" | "ru" | "ru->en"
    question: str
    relevant: str  # the article's path


@dataclass(frozen=True)
class Product:
    name: str
    kind: tuple[str, str, str]
    app: str


def _products(rng: random.Random, count: int, taken: set[str]) -> list[Product]:
    products = []
    while len(products) < count:
        name = f"{rng.choice(BRANDS)} {rng.choice('ABCDFHKMPRSTVX')}{rng.randint(1, 9)}{rng.choice(['', '0', '5'])}"
        if name in taken:
            continue
        taken.add(name)
        products.append(Product(name=name, kind=rng.choice(KINDS), app=f"{name.split()[0]} Home"))
    return products


def _pick(rng: random.Random, *variants: str) -> str:
    return rng.choice(variants)


def _facts(rng: random.Random) -> dict[str, object]:
    button, colour, part, problem = (rng.choice(BUTTONS), rng.choice(COLOURS), rng.choice(PARTS),
                                     rng.choice(PROBLEMS))
    fix = rng.choice(FIXES)
    n = rng.randint(2, 30)
    feature = rng.choice(FEATURES)
    return {
        "button": button[0], "button_ru": button[1], "colour": colour[0], "colour_ru": colour[1],
        "seconds": rng.choice([5, 8, 10, 12, 15, 20, 30]), "minutes": rng.randint(1, 6),
        "months": rng.choice([12, 18, 24, 36]), "repair_days": rng.randint(5, 15),
        "weeks": rng.randint(2, 8), "version": f"{rng.randint(1, 5)}.{rng.randint(0, 19)}.{rng.randint(0, 9)}",
        "code": f"E{rng.randint(10, 99)}", "part": part[0], "part_ru": part[1], "problem": problem[0],
        "problem_ru": problem[1], "fix": fix[0].format(n=n), "fix_ru": fix[1].format(n=n),
        "hours": rng.randint(2, 48), "return_days": rng.choice([14, 30, 60]), "carrier": rng.choice(CARRIERS),
        "refund_days": rng.randint(3, 10), "runtime": rng.randint(4, 40), "charge": rng.choice([45, 60, 90, 120, 180]),
        "watts": rng.choice([10, 18, 25, 45]), "feature": feature[0], "feature_ru": feature[1],
        "metres": rng.choice([3, 5, 10]), "band": rng.choice(["2.4", "5"]), "a": rng.randint(8, 40),
        "b": rng.randint(8, 40), "c": rng.randint(3, 30), "kg": round(rng.uniform(0.2, 6.0), 1),
        "power": rng.randint(5, 1500), "standby": round(rng.uniform(0.3, 2.5), 1), "t1": rng.choice([0, 5, 10]),
        "t2": rng.choice([35, 40, 45]), "settle_days": rng.randint(2, 14),
    }


def _english(p: Product, topic: str, f: dict[str, object], rng: random.Random) -> tuple[str, str]:
    """(title, body) of an English article."""
    n, k = p.name, p.kind[0]
    texts = {
        "reset": (f"Factory reset of the {n}", " ".join([
            _pick(rng, f"To return the {n} {k} to its factory settings, press and hold the {f['button']} button "
                       f"for {f['seconds']} seconds until the light blinks {f['colour']}.",
                  f"Hold the {f['button']} button of the {n} for {f['seconds']} seconds; when the light blinks "
                  f"{f['colour']}, the {k} returns to its factory settings."),
            _pick(rng, "All saved settings, Wi-Fi networks and schedules are erased.",
                  "This erases every setting, saved network and schedule."),
            f"The {k} restarts in about {f['minutes']} minutes and appears in the {p.app} app as a new device."])),
        "warranty": (f"Warranty for the {n}", " ".join([
            f"The {n} is covered by a {f['months']}-month limited warranty from the date of purchase.",
            _pick(rng, "The warranty covers manufacturing defects but not water damage, drops or batteries worn "
                       "by normal use.", "Defects in materials and workmanship are covered; liquid damage, falls "
                       "and normal battery wear are not."),
            f"To make a claim, send the serial number and a copy of the receipt to our service team; a repair takes "
            f"about {f['repair_days']} business days."])),
        "firmware": (f"Updating the {n} firmware", " ".join([
            f"New firmware for the {n} is released about every {f['weeks']} weeks.",
            _pick(rng, f"The {p.app} app installs it automatically at night while the {k} is idle.",
                  f"Updates install on their own overnight when the {k} is not in use."),
            f"To update by hand, open Settings > Device > Firmware and tap Check now; the current version is "
            f"{f['version']}. Do not unplug the device during the update, which takes up to {f['minutes']} minutes."])),
        "error": (f"{n} error {f['code']}", " ".join([
            f"Error {f['code']} on the {n} means that the {f['part']} is {f['problem']}.",
            f"Switch the {k} off, {f['fix']}, and switch it on again.",
            _pick(rng, f"If the error comes back within {f['hours']} hours, contact support and mention the code.",
                  f"Should the code return within {f['hours']} hours, write to support and quote it.")])),
        "cleaning": (f"Cleaning and care of the {n}", " ".join([
            _pick(rng, f"Clean the {n} every {f['weeks']} weeks with a soft dry cloth.",
                  f"Wipe the {n} with a soft, dry cloth once every {f['weeks']} weeks."),
            "Never use alcohol, solvents or a wet sponge on the housing.",
            f"The removable filter can be rinsed under lukewarm water and must dry for {f['hours']} hours before "
            f"it goes back in."])),
        "returns": (f"Returning the {n}", " ".join([
            f"You can return the {n} within {f['return_days']} days of delivery if it is in its original packaging.",
            _pick(rng, f"Print the free return label from your order page, pack the {k} with all accessories and "
                       f"drop it at any {f['carrier']} point.", f"Pack the {k} with every accessory, attach the "
                  f"free label from your order page and leave it at a {f['carrier']} point."),
            f"The refund reaches your card {f['refund_days']} business days after the warehouse receives the "
            f"parcel."])),
        "battery": (f"Battery and power of the {n}", " ".join([
            f"On a full charge the {n} runs for about {f['runtime']} hours in normal use.",
            f"Charging from empty to full takes {f['charge']} minutes with the supplied {f['watts']} W adapter.",
            _pick(rng, f"If the battery drains much faster, turn off {f['feature']} and check for a firmware update.",
                  f"Turning off {f['feature']} makes the charge last longer.")])),
        "pairing": (f"Connecting the {n} to the app", " ".join([
            f"To pair the {n}, open the {p.app} app, tap Add device and choose {k}.",
            f"Keep the {k} within {f['metres']} metres of your router; it only supports the {f['band']} GHz "
            f"Wi-Fi band.",
            _pick(rng, "If pairing fails, restart the router and try again with Bluetooth on.",
                  "When the connection fails, reboot the router and retry with Bluetooth enabled on the phone.")])),
        "specs": (f"{n} dimensions and technical data", " ".join([
            f"The {n} measures {f['a']} x {f['b']} x {f['c']} cm and weighs {f['kg']} kg.",
            f"It draws {f['power']} W in operation and {f['standby']} W in standby.",
            f"Operating temperature: {f['t1']} to {f['t2']} °C."])),
        "noise": (f"The {n} makes a noise", " ".join([
            f"A quiet hum from the {n} during the first {f['settle_days']} days is normal while the {f['part']} "
            f"settles in.",
            _pick(rng, f"A clicking or rattling sound usually means the {k} is not standing level or its cover is "
                       f"loose.", "Rattling or clicking mostly comes from an uneven surface or a loose cover."),
            "Place it on a flat surface and press the cover until it clicks."])),
    }
    return texts[topic]


def _russian(p: Product, topic: str, f: dict[str, object], rng: random.Random) -> tuple[str, str]:
    """(title, body) of a Russian article."""
    n, k_acc = p.name, p.kind[2]
    texts = {
        "reset": (f"Сброс {n} к заводским настройкам", " ".join([
            _pick(rng, f"Чтобы вернуть {k_acc} {n} к заводским настройкам, нажмите и удерживайте кнопку "
                       f"{f['button_ru']} {f['seconds']} секунд, пока индикатор не замигает {f['colour_ru']}.",
                  f"Удерживайте кнопку {f['button_ru']} на {n} {f['seconds']} секунд: когда индикатор замигает "
                  f"{f['colour_ru']}, устройство вернётся к заводским настройкам."),
            "Все сохранённые настройки, сети Wi-Fi и расписания будут удалены.",
            f"Устройство перезагрузится примерно через {f['minutes']} мин. и появится в приложении {p.app} как "
            f"новое."])),
        "warranty": (f"Гарантия на {n}", " ".join([
            f"На {n} действует ограниченная гарантия {f['months']} месяцев с даты покупки.",
            _pick(rng, "Гарантия покрывает заводские дефекты, но не повреждения водой, падения и естественный "
                       "износ аккумулятора.", "Заводской брак покрывается; попадание жидкости, удары и обычный "
                  "износ батареи — нет."),
            f"Для обращения пришлите серийный номер и копию чека в сервисную службу; ремонт занимает около "
            f"{f['repair_days']} рабочих дней."])),
        "firmware": (f"Обновление прошивки {n}", " ".join([
            f"Новая прошивка для {n} выходит примерно раз в {f['weeks']} недели.",
            _pick(rng, f"Приложение {p.app} устанавливает её автоматически ночью, когда устройство не используется.",
                  "Обновления ставятся сами ночью, пока устройство простаивает."),
            f"Чтобы обновить вручную, откройте Настройки > Устройство > Прошивка и нажмите «Проверить»; текущая "
            f"версия — {f['version']}. Не отключайте питание во время обновления, оно длится до "
            f"{f['minutes']} минут."])),
        "error": (f"Ошибка {f['code']} на {n}", " ".join([
            f"Ошибка {f['code']} на {n} означает, что {f['part_ru']} {f['problem_ru']}.",
            f"Выключите устройство, {f['fix_ru']} и включите снова.",
            f"Если ошибка повторится в течение {f['hours']} часов, обратитесь в поддержку и назовите код."])),
        "cleaning": (f"Чистка и уход за {n}", " ".join([
            _pick(rng, f"Протирайте {n} мягкой сухой тканью раз в {f['weeks']} недели.",
                  f"Каждые {f['weeks']} недели очищайте {n} сухой мягкой салфеткой."),
            "Не используйте спирт, растворители и влажную губку для корпуса.",
            f"Съёмный фильтр можно промыть тёплой водой; перед установкой он должен сохнуть {f['hours']} часов."])),
        "returns": (f"Возврат {n}", " ".join([
            f"Вернуть {n} можно в течение {f['return_days']} дней после доставки, если сохранена оригинальная "
            f"упаковка.",
            f"Распечатайте бесплатную этикетку для возврата на странице заказа, упакуйте {k_acc} со всеми "
            f"аксессуарами и сдайте в любой пункт {f['carrier']}.",
            f"Деньги вернутся на карту через {f['refund_days']} рабочих дней после того, как склад получит "
            f"посылку."])),
        "battery": (f"Аккумулятор и питание {n}", " ".join([
            f"На полном заряде {n} работает около {f['runtime']} часов в обычном режиме.",
            f"Полная зарядка занимает {f['charge']} минут с комплектным адаптером {f['watts']} Вт.",
            f"Если батарея садится намного быстрее, отключите {f['feature_ru']} и проверьте обновления прошивки."])),
        "pairing": (f"Подключение {n} к приложению", " ".join([
            f"Чтобы подключить {n}, откройте приложение {p.app}, нажмите «Добавить устройство» и выберите "
            f"{k_acc}.",
            f"Держите устройство не дальше {f['metres']} метров от роутера; поддерживается только диапазон Wi-Fi "
            f"{f['band']} ГГц.",
            "Если подключение не удаётся, перезагрузите роутер и повторите попытку с включённым Bluetooth."])),
        "specs": (f"Размеры и технические характеристики {n}", " ".join([
            f"Размеры {n}: {f['a']} x {f['b']} x {f['c']} см, вес {f['kg']} кг.",
            f"Потребляемая мощность в работе {f['power']} Вт, в режиме ожидания {f['standby']} Вт.",
            f"Рабочая температура: от {f['t1']} до {f['t2']} °C."])),
        "noise": (f"{n} шумит", " ".join([
            f"Тихое гудение {n} в первые {f['settle_days']} дней — это нормально, пока {f['part_ru']} "
            f"прирабатывается.",
            "Щелчки или дребезжание обычно означают, что устройство стоит неровно или крышка плохо закреплена.",
            "Поставьте его на ровную поверхность и прижмите крышку до щелчка."])),
    }
    return texts[topic]


TOPICS = ["reset", "warranty", "firmware", "error", "cleaning", "returns", "battery", "pairing", "specs", "noise"]

# Questions are worded apart from the articles: synonyms, symptoms, colloquial phrasing.
EN_QUESTIONS = {
    "reset": ["How do I restore my {n} to default settings?", "My {n} is stuck, how can I wipe it and start over?"],
    "warranty": ["How long is the guarantee on the {n}?", "My {n} got wet, will the guarantee pay for the repair?"],
    "firmware": ["How do I get the newest software on my {n}?", "Which software version is the latest for the {n}?"],
    "error": ["My {n} shows {code}, what does it mean?", "What should I do about code {code} on the {n}?"],
    "cleaning": ["What is the right way to wash the {n}?", "Can I use alcohol to clean the {n}?"],
    "returns": ["I want to send back my {n}, how many days do I have?",
                "When do I get my money after sending the {n} back?"],
    "battery": ["How long does the {n} last between charges?", "How many minutes does the {n} need to charge?"],
    "pairing": ["How do I link the {n} with my phone?", "Does the {n} work with my home Wi-Fi on 5 GHz?"],
    "specs": ["How heavy is the {n}?", "How much electricity does the {n} use when idle?"],
    "noise": ["Why is my {n} rattling?", "Strange clicking sound coming from the {n}, is it broken?"],
}
RU_QUESTIONS = {
    "reset": ["Как сбросить {n} до заводских настроек?", "{n} завис, как стереть всё и начать заново?"],
    "warranty": ["Какой гарантийный срок у {n}?", "На {n} попала вода, ремонт будет по гарантии?"],
    "firmware": ["Как поставить последнюю версию программы на {n}?", "Какая версия прошивки у {n} сейчас актуальна?"],
    "error": ["{n} показывает {code}, что это значит?", "Что делать с кодом {code} на {n}?"],
    "cleaning": ["Как правильно мыть {n}?", "Можно ли чистить {n} спиртом?"],
    "returns": ["Хочу вернуть {n}, сколько у меня дней?", "Когда придут деньги после возврата {n}?"],
    "battery": ["Сколько {n} держит заряд?", "Сколько минут заряжается {n}?"],
    "pairing": ["Как связать {n} с телефоном?", "Работает ли {n} с Wi-Fi на 5 ГГц?"],
    "specs": ["Сколько весит {n}?", "Сколько электричества потребляет {n} в режиме ожидания?"],
    "noise": ["Почему {n} дребезжит?", "Из {n} слышны щелчки, это поломка?"],
}


def corpus_build(seed: int = 16, en_products: int = 62, ru_products: int = 40,
                 questions_per_setting: int = 200) -> tuple[list[Article], list[Question]]:
    """The articles (``en_products`` x 10 English + ``ru_products`` x 10 Russian) and labelled questions."""
    rng = random.Random(seed)
    taken: set[str] = set()
    english, russian = _products(rng, en_products, taken), _products(rng, ru_products, taken)
    articles: list[Article] = []
    facts: dict[str, dict[str, object]] = {}
    for language, products, writer in (("en", english, _english), ("ru", russian, _russian)):
        for product in products:
            for topic in TOPICS:
                f = _facts(rng)
                title, body = writer(product, topic, f, rng)
                path = f"{language}/{product.name.lower().replace(' ', '-')}/{topic}.md"
                facts[path] = {**f, "n": product.name}
                articles.append(Article(path=path, language=language, text=f"# {title}\n\n{body}\n"))
    questions: list[Question] = []
    for setting, language, templates in (("en", "en", EN_QUESTIONS), ("ru", "ru", RU_QUESTIONS),
                                         ("ru->en", "en", RU_QUESTIONS)):
        pool = [a for a in articles if a.language == language]
        for article in rng.sample(pool, min(questions_per_setting, len(pool))):
            topic = article.path.rsplit("/", 1)[1].removesuffix(".md")
            template = rng.choice(templates[topic])
            questions.append(Question(setting=setting, question=template.format(**facts[article.path]),
                                      relevant=article.path))
    return articles, questions


def corpus_write(folder: Path, **options: int) -> list[Question]:
    """Write the articles under ``folder`` and ``questions.jsonl`` beside them; returns the questions."""
    articles, questions = corpus_build(**options)
    for article in articles:
        path = folder / "kb" / article.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(article.text, encoding="utf-8")
    with (folder / "questions.jsonl").open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(json.dumps({"question": q.question, "relevant": [q.relevant], "setting": q.setting},
                                 ensure_ascii=False) + "\n")
    return questions


if __name__ == "__main__":
    import sys

    written = corpus_write(Path(sys.argv[1] if len(sys.argv) > 1 else "support-corpus"))
    print(f"wrote {len(written)} questions")
