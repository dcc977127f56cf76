// The operators' Azure Monitor workbook over the app's metrics (infra/app/workbook.json, the
// serialized workbook as the portal's Advanced Editor shows it). Two placeholders are filled in
// here: the Application Insights component the queries run against, and the in-flight bound the
// oldest-age chart draws (the same number the in-flight-age alert uses).
param applicationInsightsName string
param location string
param tags object
param displayName string

@minValue(1)
param inFlightAgeBoundSeconds int

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var serialized = replace(
  replace(loadTextContent('./workbook.json'), '__APPLICATION_INSIGHTS_ID__', applicationInsights.id),
  '__IN_FLIGHT_AGE_BOUND_SECONDS__',
  string(inFlightAgeBoundSeconds)
)

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name must be a GUID; this one is stable per component, so redeploys update it.
  name: guid(applicationInsights.id, 'order-processing-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: displayName
    category: 'workbook'
    sourceId: applicationInsights.id
    serializedData: serialized
  }
}

output id string = workbook.id
